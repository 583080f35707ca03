"""deploy, reconfigure, rotate-keys and upgrade: a host converges to the declaration,
on this host through salt-call, through a master by a walk of the set tree."""
import contextlib
import json
import sys

from .. import healthloop
from ..errors import KollaError, ValidationError
from ..rollout import changing_hosts, describe
from ..inventory import service_specs
from ..master import compared
from ..statereturns import summarise
from ..tree import in_set
from .common import _client, _declared_here, _ensure_health_loop, _host_name, _host_settings, _on, _release, _road
from .common import _select, _settings, _split, _validated_pillar
from .declaring import _declaration_files, _declaring, _undeclared, _validate_declaration


def _check_release_paths(hosts, allow_jump):
    """Refuses, before anything changes, a release change OpenStack does not support
    (kolla_salt.releases.upgrade_path_problem) unless --allow-release-jump, which is
    said instead. `hosts`: {host (None: this host): (the services declared there,
    {container: the release it runs})}: what runs is known by the kolla.release
    label of its image (facts of a master's minions carry them too)."""
    from ..preflight import judged_jumps
    from ..releases import load_releases, release_path_problems
    releases = load_releases()
    problems, notes = judged_jumps([problem for host, (services, running) in hosts.items()
                                    for problem in release_path_problems(releases, services, running, host)],
                                   allow_jump)
    for note in notes:
        print(f"[deploy] {note}")
    if problems:
        raise ValidationError(problems)


def _check_here(services, allow_jump):
    from ..releases import running_releases
    _check_release_paths({None: (services, running_releases(_client()))}, allow_jump)


def _check_through_master(hosts, facts, names, allow_jump, release=None):
    """The release paths of every host's `names` (all when empty; `hosts`: the
    declaration, Master.declaration), declared at `release` when given (an upgrade's
    --release, before it is declared)."""
    _check_release_paths({host: ([{**s, **({"release": release} if release else {})}
                                  for s in declared["services"] if not names or s["name"] in names],
                                 facts[host]["releases"]) for host, declared in hosts.items()}, allow_jump)


def _state_apply(args, settings, sls, extra_pillar=None, test=False):
    from ..settings import load_passwords
    from ..saltcall import salt_call
    cli_pillar = json.dumps(extra_pillar or {})
    salt_args = ["state.apply", sls, f"pillar={cli_pillar}"] + (["test=True"] if test else [])
    # Every password of passwords.yml is hidden from what is printed, not only those
    # this host's pillar holds (the ones its services use).
    code, data = salt_call(args.config_dir, settings["kolla_state_directory"], salt_args,
                           secrets=load_passwords(args.config_dir).values())
    return code, data


def cmd_deploy(args):
    if args.master:
        facts = args.master.preflight()
        hosts = args.master.declared(facts)   # what each host's pillar says of itself, its prediction says
        return _orchestrate(args, "kolla.deploy", facts, hosts, _selected_names(hosts, args.services), predict=True)
    return _deploy(args)


def cmd_rotate_keys(args):
    """Rotates the key repositories that rotate (keystone's fernet keys): the staged key
    becomes the primary one, a new key is staged; then deploys their services, which
    writes the new keys on every host. Refused while some host does not hold the
    current keys yet (its deploy did not reach it): the key made primary now must have
    been on every host as the staged one ("distribute before use")."""
    from .. import keys
    declared = args.master.declaration(args.master.preflight(declared=True)) if args.master \
        else {None: {"services": _validated_pillar(args)["kolla"]["services"]}}
    prefix = _settings(args)["container_name_prefix"]
    rotating = []
    for service, repositories in keys.declared().items():
        hosts = sorted(h for h, d in declared.items() if any(s["name"] == service for s in d["services"]))
        for name, entry in repositories.items():
            if "rotate" not in entry or not hosts:
                continue
            path = keys.repository_path(args.config_dir, service, name)
            current = keys.load(path)
            volume = prefix + entry["volume"]
            held = _road(args).returns(hosts, "kolla_keys.digest", volume, timeout=30)
            behind = [_host_name(h) for h in hosts if held.get(h) != keys.digest(current)]
            if behind:
                raise KollaError(f"{path}: not rotated: {', '.join(behind)} do(es) not hold these keys in {volume} "
                                 f"yet (or did not answer); run `kolla-salt deploy` first, so the key made "
                                 f"primary is on every host before it is used; nothing was changed")
            rotating.append((service, path, keys.rotated(current, entry["rotate"])))
    if not rotating:
        print("[rotate-keys] no host runs a service with keys that rotate; nothing to do")
        return 0
    for service, path, new in rotating:
        keys.save(path, new)
        print(f"[rotate-keys] {path}: key {max(map(int, new))} is the primary one now, a new key is staged, "
              f"{len(new)} kept")
    args.services = ",".join(sorted({service for service, _, _ in rotating}))
    args.test, args.allow_release_jump = False, False
    return cmd_deploy(args)


def _all_services(hosts):
    """Every host's services (each once, in deploy order) of {host: {"services": its
    entries}} (a declaration, Master.declaration): for _select and what a release
    rollback stops first."""
    from ..tree import service_order
    order = {service: index for index, (_, service) in enumerate(service_order())}
    services = {s["name"]: s for declared in hosts.values() for s in declared["services"]}
    return sorted(services.values(), key=lambda s: order[s["name"]])


def _selected_names(hosts, services_arg):
    """The --services names, checked against what runs on some host ([] for all)."""
    return [s["name"] for s in _select(_all_services(hosts), _split(services_arg))] if services_arg else []


# How a real walk through a master goes (kolla_salt.rollout.walk), for the operator.
WALKS = {"deploy": "a prediction first, then each set where it changes something, once the sets it waits for are "
                   "healthy, side by side with the sets that do not wait for each other",
         "upgrade": "a prediction first, then set by set and batch by batch where it changes something, each gated "
                    "on the health of the one before"}


def _orchestrate(args, sls, facts, hosts, names, extra_pillar=None, predict=False):
    """deploy/upgrade through a salt-master, after its preflight (the hosts' `facts`):
    walks the set tree across hosts (`hosts`: what each gets, Master.declaration).
    With `predict` (a deploy), every host predicts first (Master.predict): that
    answers --test, and a deploy that would change nothing, without a walk; each
    host's prediction also says what its pillar says of itself (Master.declaration
    asks it otherwise) and the Galera founder check follows it."""
    from ..pins import load_pins
    from ..master import host_returns, step_failure, step_note, step_timing
    command = "upgrade" if sls == "kolla.upgrade" else "deploy"
    for host, declared in sorted(hosts.items()):
        print(f"[{command}] {host}: " + (", ".join(s["name"] for s in declared["services"]
                                                    if not names or s["name"] in names) or "nothing"))
    for pin in load_pins(args.config_dir).describe():
        print(f"[{command}] pins.yml: {pin}")
    # When every host's prediction is the whole answer (--test, or no host would
    # change anything) no walk is needed.
    # Each host's prediction checks it first (kolla.deploy's first states) and refuses
    # before the walk changes anything anywhere.
    predicted = args.master.predict(sorted(hosts), names, args.allow_release_jump) if predict else {}
    _refused(predicted)
    _take_what_pillars_said(hosts, facts, predicted)
    if predict and (not names or "mariadb" in names):
        args.master.check_galera(facts, hosts)
    if predict and set(predicted) == set(hosts) and (args.test or not changing_hosts(predicted)):
        return _predicted(args, command, facts, hosts, names, predicted)
    how = "one state run on every host: a prediction has no order to keep" if args.test else WALKS[command]
    print(f"[{command}] {'checking' if args.test else 'running'} salt-run state.orchestrate {sls} ({how})", flush=True)
    ok, steps = args.master.orchestrate(sls, {**({"kolla_services": names} if names else {}),
                                              **(extra_pillar or {})}, test=args.test)
    changed = failed = 0
    for step in steps:
        step_changed, step_failed = _summarise_hosts(host_returns(step))
        changed, failed = changed + step_changed, failed + step_failed
        note = step_note(step)
        if note:
            print(f"[{command}] {note}")
        print(f"[{command}] step {step_timing(step)}")
        failure = step_failure(step)
        if failure:
            failed += 1
            print(f"FAILED  {step['__id__']}: {failure}")   # a runner step's name is its function
    print(f"[{command}] {len(steps)} step(s) on {len(hosts)} host(s): {changed} changed, {failed} failed")
    return _after_walk(args, command, facts, hosts, names, ok and failed == 0)


def _take_what_pillars_said(hosts, facts, predicted):
    """Each host's prediction says what its pillar says of itself (the first state's
    `declared`, kolla_salt.master.pillar_summary): taken into `hosts` against its
    facts (whether its minion holds that pillar, its Galera member). A host that said
    nothing is refreshed after the walk and its member asked."""
    for host, states in predicted.items():
        said = (_first_states(states).get(CHECKS_STATE) or {}).get("declared")
        if said:
            hosts[host].update(compared(facts[host], said))


def _summarise_hosts(by_host):
    """summarise for each host of {host: its state returns}, each line naming the host:
    (changed, failed) of them all."""
    changed = failed = 0
    for host, states in sorted(by_host.items()):
        host_changed, host_failed, _ = summarise(states, out=lambda line, host=host: print(f"{host}: {line}"))
        changed, failed = changed + host_changed, failed + host_failed
    return changed, failed


def _predicted(args, command, facts, hosts, names, predicted):
    """A deploy through a master answered by its prediction: what each host would
    change (--test), or that none would (no walk)."""
    print(f"[{command}] predicted: kolla.deploy under test=True on every host at once")
    changed, failed = _summarise_hosts(predicted)
    if not args.test:
        print(f"[{command}] {describe({})}")
    print(f"[{command}] {len(hosts)} host(s): {changed} changed, {failed} failed")
    return _after_walk(args, command, facts, hosts, names, failed == 0)


def _after_walk(args, command, facts, hosts, names, ok):
    """What follows a walk through a master: the minions whose pillar changed take it,
    and after a deploy of keystone the client files say where it is."""
    if not args.test:
        refreshed = args.master.refresh_pillars(hosts)
        if refreshed:
            print(f"[{command}] pillar refreshed on {', '.join(refreshed)} (what their minions hold changed)")
    keystone_hosts = [h for h, declared in sorted(hosts.items()) if any(s["name"] == "keystone"
                                                                        for s in declared["services"])]
    if ok and not args.test and keystone_hosts and (not names or "keystone" in names):
        from ..clouds import write_client_files
        from ..settings import load_passwords
        for path in write_client_files(args.config_dir, _host_settings(args, facts[keystone_hosts[0]]["interfaces"]),
                                       load_passwords(args.config_dir)):
            print(f"[{command}] wrote {path}")
    return 0 if ok else 1


# The ids of kolla.deploy's first states (salt/states/kolla/deploy.sls): their
# verdict is a deploy's refusal before anything changed, on one host or any.
CHECKS_STATE, IN_USE_STATE = "kolla-deploy-checks", "kolla-deploy-nothing-kept-in-use"


def _first_states(states):
    """{id: return} of kolla.deploy's first states in a state run's return."""
    if not isinstance(states, dict):
        return {}
    return {tag.split("_|-")[1]: ret for tag, ret in states.items()
            if tag.count("_|-") == 3 and tag.split("_|-")[1] in (CHECKS_STATE, IN_USE_STATE)}


def _refused(by_host):
    """What kolla.deploy's first states said on each host of {host (None: this host):
    its state run}: bad input (an unknown service, a release jump, an image not
    there, operator files that do not validate) raises ValidationError, containers a
    full deploy would remove though something uses them KollaError; what they noted
    (a release jump allowed, a warning) is printed."""
    problems, kept = [], []
    for host, states in sorted(by_host.items(), key=lambda item: item[0] or ""):
        first = _first_states(states)
        checks, in_use = first.get(CHECKS_STATE), first.get(IN_USE_STATE)
        lines = checks["comment"].splitlines() if checks else []
        if checks and checks["result"] is False:
            problems += [f"{_on(host)}{line}" for line in lines]
        for line in lines if checks and checks["result"] is not False else ():
            warning = line.removeprefix("warning: ")
            if warning != line:
                print(f"warning: {_on(host)}{warning}", file=sys.stderr)
            else:
                print(f"[deploy] {_on(host)}{line}")
        if in_use and in_use["result"] is False:
            kept.append(f"{_on(host)}{in_use['comment']}")
    if problems:
        raise ValidationError(problems)
    if kept:
        raise KollaError("; ".join(kept) + "; nothing was changed")


def _deploy(args, extra_pillar=None):
    """A deploy on this host: salt-call --local state.apply kolla.deploy, the pillar
    compiled once, by Salt (with `extra_pillar`); the run's first states refuse it
    (_refused) before anything changes."""
    from ..pins import load_pins
    from ..settings import load_passwords
    settings, names = _host_settings(args), _split(args.services)
    print(f"[deploy] {'checking' if args.test else 'deploying'} "
          f"{', '.join(names) or 'every service declared for this host'} (salt-call --local state.apply kolla.deploy)",
          flush=True)
    for pin in load_pins(args.config_dir).describe():
        print(f"[deploy] pins.yml: {pin}")
    # Without --services the run also removes containers of disabled services, but not
    # one still in use.
    extra = {**(extra_pillar or {}), **({"kolla_services": names} if names else {}),
             **({"kolla_allow_release_jump": args.allow_release_jump} if args.allow_release_jump else {})}
    # The health loop must not restart a container that is being swapped in.
    with contextlib.nullcontext() if args.test else healthloop.ledger(settings).paused_restarts():
        code, data = _state_apply(args, settings, "kolla.deploy", extra, test=args.test)
    _refused({None: data})
    changed, failed, total = summarise(data)
    print(f"[deploy] {total} states: {changed} changed, {failed} failed")
    ok = code == 0 and failed == 0
    if ok and not args.test and any("_|-kolla-keystone-container-" in tag for tag in data):
        from ..clouds import write_client_files
        for path in write_client_files(args.config_dir, settings, load_passwords(args.config_dir)):
            print(f"[deploy] wrote {path}")
    if not args.test:
        _ensure_health_loop(args, settings, "deploy")
    return 0 if ok else 1


def cmd_upgrade(args):
    """Upgrade = converge to the (new) release in tree order, one container at a time:
    images first, then per service its jobs (schema migrations) and atomic swaps.
    The decision is declared before anything changes: --release alone sets
    openstack_release in globals.yml; with --services/--set it pins those services
    to the release in pins.yml (the others stay where they are). Pins that held the
    upgraded services' containers (rollback) are dropped. On one host the pillar is
    compiled once, by the deploy's salt-call: what the declaration names comes from
    the service definitions (kolla_salt.roles.declared_services), and a declaration
    the deploy's first states refuse is taken back."""
    if args.release:
        _release(args.release)
    if args.master:   # the hosts' facts come with what their pillars say of the new declaration (check)
        facts = {}
        old = args.master.declared(args.master.minions())
        declared = _all_services(old)
    else:
        declared = _declared_here(args)
    services = _select(declared, _split(args.services))
    if args.set:
        services = [s for s in services if in_set(s["set"], args.set)]
        if not services:
            raise ValidationError([f"--set: no enabled service belongs to a set named '{args.set}'"])
    names = [s["name"] for s in services]
    everything = not (args.services or args.set)
    new, hosts = [], {}

    def check():
        """The new declaration before it is kept (refused: taken back): through a master
        where its services run, then in one Salt round every host's facts (the release
        each container runs: a jump refused) and its pillar; on one host what it names
        (a release jump refused, an allowed one the deploy that follows says)."""
        if args.master:
            _validate_declaration(args.config_dir, args.master)
            facts.update(args.master.preflight(declared=True))
            _check_through_master(old, facts, names, args.allow_release_jump, args.release)
            return hosts.update(args.master.declaration(facts))
        new.extend(s for s in _declared_here(args) if s["name"] in names)
        if not args.allow_release_jump:
            _check_here(new, allow_jump=False)
    settings = _settings(args)   # the declaration before this command's
    before = _declaration_files(args.config_dir)
    with _declaring(args.config_dir, check) as (user_globals, pins):
        if args.release and everything:
            user_globals["openstack_release"] = args.release
            pins.services.clear()
        for service in services:
            if args.release and not everything:
                pins.services[service["name"]] = {"release": args.release}
            for container in service["containers"]:   # held here, or on a host through a master
                pins.release_container(container["spec"]["name"])
        # A service pinned to the release every service follows needs no pin.
        release = user_globals.get("openstack_release", settings["openstack_release"])
        for name in [n for n, pin in pins.services.items() if pin["release"] == release]:
            del pins.services[name]
    args.test = False
    if args.master:   # hosts pull the new images from docker_registry
        _backup_before_migrations_through_master(args, facts, hosts, names)
        return _orchestrate(args, "kolla.upgrade", facts, hosts, names, {"kolla_batch": args.batch})
    print("[upgrade] " + ", ".join(f"{s['name']} to {s['release']}" for s in new), flush=True)
    from ..build import Builder, image_folder
    from ..settings import settings_for_release
    for release in sorted({s["release"] for s in new}):
        images = sorted({image_folder(spec["image"]) for s in new if s["release"] == release
                         for spec in service_specs(s)})
        Builder(_client(), settings_for_release(settings, release), out=lambda m: print(m, flush=True)).build(images)
    args.services = ",".join(names)
    try:   # its salt-call backs the database up after its checks, before the migrations
        return _deploy(args, {"kolla_backup_before_migrations": "kolla-salt upgrade"})
    except ValidationError:   # its first states refused the new declaration before anything changed
        _undeclared(args.config_dir, before)
        raise


def _backup_before_migrations_through_master(args, facts, hosts, names):
    """The same through a master: a backup of the Galera cluster (or the one database
    host) when a container of `names` on any host changes release."""
    from ..backup import changing_releases
    from .database import _backup   # here: the database's commands walk with this module's functions
    changing = set().union(*(changing_releases([s for s in declared["services"] if s["name"] in names],
                                                facts[host]["releases"]) for host, declared in hosts.items()))
    if changing and args.master.members("mariadb", facts)[0]:
        _backup(args, f"before the upgrade to {', '.join(sorted(changing))} (kolla-salt upgrade)")
