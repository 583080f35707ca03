"""deploy, reconfigure, rotate-keys and upgrade: the hosts converge to the declaration,
by one road (_converge): this host through salt-call (saltcall.Here.converge), many
through a master by a walk of the set tree (master.Master.converge)."""
from ..declaration.inventory import service_specs
from ..declaration.tree import in_set
from ..errors import KollaError, ValidationError
from ..roads.statereturns import on_host, summarise
from .common import _client, _declared_here, _host_name, _host_settings, _release, _road, _select, _settings
from .common import _split, _validated_pillar
from .declaring import _declaration_files, _declaring, _undeclared, _validate_declaration


def _check_release_paths(hosts, allow_jump):
    """Refuses, before anything changes, a release change OpenStack does not support
    (kolla_salt.declaration.releases.upgrade_path_problem) unless --allow-release-jump, which is
    said instead. `hosts`: {host (None: this host): (the services declared there,
    {container: the release it runs})}: what runs is known by the kolla.release
    label of its image (facts of a master's minions carry them too)."""
    from ..declaration.preflight import judged_jumps
    from ..declaration.releases import load_releases, release_path_problems
    releases = load_releases()
    problems, notes = judged_jumps([problem for host, (services, running) in hosts.items()
                                    for problem in release_path_problems(releases, services, running, host)],
                                   allow_jump)
    for note in notes:
        print(f"[deploy] {note}")
    if problems:
        raise ValidationError(problems)


def _check_here(services, allow_jump):
    from ..declaration.releases import running_releases
    _check_release_paths({None: (services, running_releases(_client()))}, allow_jump)


def _check_through_master(hosts, facts, names, allow_jump, release=None):
    """The release paths of every host's `names` (all when empty; `hosts`: the
    declaration, Master.declaration), declared at `release` when given (an upgrade's
    --release, before it is declared)."""
    _check_release_paths({host: ([{**s, **({"release": release} if release else {})}
                                  for s in declared["services"] if not names or s["name"] in names],
                                 facts[host]["releases"]) for host, declared in hosts.items()}, allow_jump)


def cmd_deploy(args):
    if not args.master:   # the deploy's salt-call compiles the pillar once, its first states check it
        return _converge(args, "deploy", None, {}, _split(args.services), predict=True)
    facts = args.master.preflight()
    hosts = args.master.declared(facts)   # what each host's pillar says of itself, its prediction says
    return _converge(args, "deploy", facts, hosts, _selected_names(hosts, args.services), predict=True)


def cmd_rotate_keys(args):
    """Rotates the key repositories that rotate (keystone's fernet keys): the staged key
    becomes the primary one, a new key is staged; then deploys their services, which
    writes the new keys on every host. Refused while some host does not hold the
    current keys yet (its deploy did not reach it): the key made primary now must have
    been on every host as the staged one ("distribute before use")."""
    from ..operations import keys
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
    from ..declaration.tree import service_order
    order = {service: index for index, (_, service) in enumerate(service_order())}
    services = {s["name"]: s for declared in hosts.values() for s in declared["services"]}
    return sorted(services.values(), key=lambda s: order[s["name"]])


def _selected_names(hosts, services_arg):
    """The --services names, checked against what runs on some host ([] for all)."""
    return [s["name"] for s in _select(_all_services(hosts), _split(services_arg))] if services_arg else []


def _converge(args, command, facts, hosts, names, extra_pillar=None, predict=False):
    """A deploy or an upgrade (`command`) of `names` (all when empty) by _road
    (Here.converge on this host, Master.converge through a master: `hosts`, the
    declaration, and their `facts`, from its preflight; with `predict` the hosts
    predict first). Each road refuses before anything changes; what every step did on
    every host is said here, then the road settles (Here: the health loop; a master:
    the pillars refreshed) and, after a deploy of the service whose settings.yml says
    `client_files` (keystone), the client files say where it is."""
    from ..declaration.pins import load_pins
    for pin in load_pins(args.config_dir).describe():
        print(f"[{command}] pins.yml: {pin}")
    # Without --services the run also removes containers of disabled services, but not
    # one still in use.
    pillar = {**(extra_pillar or {}), **({"kolla_services": names} if names else {}),
              **({"kolla_allow_release_jump": args.allow_release_jump} if args.allow_release_jump else {})}
    road = _road(args)
    ok, steps = road.converge(command, pillar, args.test, hosts, facts, predict)
    changed = failed = total = 0
    for step in steps:
        for host, states in sorted(step["hosts"].items(), key=lambda item: item[0] or ""):
            step_changed, step_failed, step_total = summarise(states, out=lambda line, host=host: print(
                f"{on_host(host)}{line}"))
            changed, failed, total = changed + step_changed, failed + step_failed, total + step_total
        if step.get("note"):
            print(f"[{command}] {step['note']}")
        if step.get("timing"):
            print(f"[{command}] step {step['timing']}")
        if step.get("failure"):
            failed += 1
            print(f"FAILED  {step['failure']}")
    print(f"[{command}] {len(hosts)} host(s), {len(steps)} step(s), {total} states: {changed} changed, "
          f"{failed} failed")
    ok = ok and failed == 0
    if not args.test:
        road.settle(command, hosts)
    from ..declaration.settings import client_file_services
    doors = client_file_services()
    front = [h for h, declared in sorted(hosts.items(), key=lambda item: item[0] or "")
             if any(s["name"] in doors for s in declared["services"])]
    if ok and not args.test and front and (not names or set(names) & doors):
        from ..declaration.settings import load_passwords
        from ..operations.clouds import write_client_files
        settings = _host_settings(args, facts[front[0]]["interfaces"] if facts else None)
        for path in write_client_files(args.config_dir, settings, load_passwords(args.config_dir)):
            print(f"[{command}] wrote {path}")
    return 0 if ok else 1


def cmd_upgrade(args):
    """Upgrade = converge to the (new) release in tree order, one container at a time:
    images first, then per service its jobs (schema migrations) and atomic swaps.
    The decision is declared before anything changes: --release alone sets
    openstack_release in globals.yml; with --services/--set it pins those services
    to the release in pins.yml (the others stay where they are). Pins that held the
    upgraded services' containers (rollback) are dropped. On one host the pillar is
    compiled once, by the deploy's salt-call: what the declaration names comes from
    the service definitions (kolla_salt.declaration.roles.declared_services), and a declaration
    the deploy's first states refuse is taken back."""
    if args.release:
        _release(args.release)
    facts = {}   # through a master the hosts', with what their pillars say of the new declaration (check)
    if args.master:
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
    if not args.master:   # this host builds the new images; a master's hosts pull them from docker_registry
        _build(settings, new)
    try:   # the database is backed up after the checks, before the migrations
        return _converge(args, "upgrade", facts, hosts, names,
                         {"kolla_backup_before_migrations": "kolla-salt upgrade", "kolla_batch": args.batch})
    except ValidationError:   # the first states refused the new declaration before anything changed
        _undeclared(args.config_dir, before)
        raise


def _build(settings, services):
    """The images of `services` (declared_services' entries) that their releases need
    (kolla_salt.images.build), built on this host."""
    from ..declaration.settings import settings_for_release
    from ..images.build import Builder, image_folder
    print("[upgrade] " + ", ".join(f"{s['name']} to {s['release']}" for s in services), flush=True)
    for release in sorted({s["release"] for s in services}):
        images = sorted({image_folder(spec["image"]) for s in services if s["release"] == release
                         for spec in service_specs(s)})
        Builder(_client(), settings_for_release(settings, release), out=lambda m: print(m, flush=True)).build(images)
