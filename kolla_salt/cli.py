"""kolla-salt: build images, deploy, reconfigure, upgrade and roll back
containerized OpenStack with Salt. Every subcommand has --help."""
import argparse
import contextlib
import json
import os
import secrets as random_secrets
import socket
import sys
import time
from pathlib import Path

import yaml

from . import healthloop, paths, safeyaml
from .errors import KollaError, NoEarlierGeneration, ValidationError
from .private import write_private
from .rollout import changing_hosts, describe
from .inventory import service_specs
from .settings import wanted_passwords
from .tree import in_set

EXIT_INVALID = 2


def _settings(args, warnings=None):
    from .settings import load_settings
    return load_settings(args.config_dir, warnings)


def _client():
    import docker
    return docker.from_env(timeout=600)


def _validated_pillar(args):
    """Validates every operator file; prints warnings; raises ValidationError."""
    from .inventory import build_pillar
    warnings = []
    pillar = build_pillar(args.config_dir, minion_id=socket.gethostname(), warnings=warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return pillar


def _declared_here(args):
    """This host's services as the declaration names them, without compiling the
    pillar (kolla_salt.roles.declared_services)."""
    from .pins import load_pins
    from .roles import declared_services
    return declared_services(_settings(args), load_pins(args.config_dir), socket.gethostname())


def _select(services, names, where="--services"):
    """The entries of `services` (the pillar's, or kolla_salt.roles.declared_services')
    that `names` name (all when empty); a name none has is refused."""
    from .preflight import unknown_services
    unknown = unknown_services([s["name"] for s in services], names, where)
    if unknown:
        raise ValidationError(unknown)
    return [s for s in services if not names or s["name"] in names]


def _split(text):
    return [part.strip() for part in (text or "").split(",") if part.strip()]


# -- commands --------------------------------------------------------------------------
def cmd_genpwd(args):
    """Fills missing passwords, keeps existing ones; the file is mode 0600."""
    wanted = wanted_passwords()
    path = Path(args.config_dir) / "passwords.yml"
    current = safeyaml.load(path.read_text()) if path.exists() else {}
    current = current or {}
    added = [k for k in wanted if not current.get(k)]
    for key in added:
        current[key] = random_secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, yaml.safe_dump(current, default_flow_style=False))
    print(f"{path}: {len(added)} password(s) generated, {len(current) - len(added)} kept (mode 0600)")
    _make_key_repositories(args.config_dir)


def _make_key_repositories(config_dir):
    """The key repositories services declare (kolla_salt.keys) that the operator folder
    lacks: those a volume on this host already holds (a deployment made before kolla-salt
    kept them here) are adopted, the others made."""
    from . import keys
    prefix = _settings(argparse.Namespace(config_dir=config_dir))["container_name_prefix"]
    for service, repositories in keys.declared().items():
        for name, entry in repositories.items():
            path = keys.repository_path(config_dir, service, name)
            try:
                keys.load(path)
                continue
            except ValidationError:
                if path.exists():
                    raise
            found = _volume_keys_here(prefix + entry["volume"])
            keys.save(path, found or keys.new_repository())
            keys.load(path)   # adopted keys are checked as well
            print(f"{path}: " + (f"adopted from the volume {prefix}{entry['volume']} on this host" if found
                                 else "made") + " (mode 0600)")


def _volume_keys_here(volume):
    """The keys a volume of this host's engine holds ({} without an engine or volume)."""
    import docker.errors

    from . import keys
    try:
        return keys.volume_keys(_client(), volume)
    except docker.errors.DockerException:
        return {}


def cmd_certificates(args):
    """A private CA (kept once made) and the certificate of each endpoint TLS is on for
    (kolla_salt.certificates: haproxy.pem for the external VIP and FQDN,
    haproxy-internal.pem for the internal VIP, the external one when neither is on;
    backend-cert.pem and backend-key.pem for the API address of this host, or of every
    host through a master); a current one is kept while it is valid for more than 30
    days and covers them, unless --renew."""
    from . import certificates
    if not 1 <= args.days <= 3650:
        raise ValidationError([f"--days: between 1 and 3650, got {args.days}"])
    settings = _with_api_addresses(args, _settings(args))
    wanted = certificates.enabled(settings) or [certificates.EXTERNAL]
    empty = [f"{args.config_dir}/globals.yml: key '{endpoint.names[-1]}' is empty: {endpoint.pem} is for that "
             f"address" for endpoint in wanted if not endpoint.covers(settings)]
    if empty:
        raise ValidationError(empty)
    if not args.renew:
        for endpoint in list(wanted):
            try:
                path, _, expiry = certificates.checked(settings, args.config_dir, endpoint)
            except ValidationError:
                continue
            if not certificates.expiring(expiry):
                print(f"{path}: kept, valid until {expiry:%Y-%m-%d} for {', '.join(endpoint.covers(settings))} "
                      f"(--renew makes a new one)")
                wanted.remove(endpoint)
        if not wanted:
            return 0
    certificates.make(certificates.certificates_dir(settings, args.config_dir), {endpoint.pem: endpoint.covers(settings) for endpoint in wanted}, args.days)
    print("the next `kolla-salt deploy` serves " + ("them" if len(wanted) > 1 else "it")
          + ("" if certificates.enabled(settings) else " once globals.yml sets kolla_enable_tls_external: true"))
    return 0


def _with_api_addresses(args, settings):
    """`settings` with the API addresses of the hosts as api_interface_address, when
    backend TLS is on: the names its certificate covers (certificates.BACKEND)."""
    if not settings["kolla_enable_tls_backend"]:
        return settings
    from .hostfacts import interface_address, local_interfaces
    facts = args.master.host_facts() if args.master else {"this host": {"interfaces": local_interfaces()}}
    return {**settings, "api_interface_address": sorted(interface_address(settings, found["interfaces"])
                                                        for found in facts.values() if found)}


def cmd_validate(args):
    pillar = _validated_pillar(args)
    services = pillar["kolla"]["services"]
    print(f"{args.config_dir}: valid; {len(services)} service(s) for this host: "
          + ", ".join(s["name"] for s in services))
    if any(s["name"] == "nova_compute" for s in services):
        settings = pillar["kolla"]["settings"]
        print(f"guests run with {settings['nova_compute_virt_type']}; this host offers {settings['virtualization']}")
    if any(s["name"] == "openvswitch" for s in services):
        print(f"Open vSwitch forwards with the {pillar['kolla']['settings']['ovs_datapath_type']} datapath "
              f"(system: the kernel's openvswitch module; netdev: userspace)")


def cmd_releases(args):
    """The releases whose whole cloud kolla-salt's tests prove (releases.yml `cloud`);
    with --all every release it can build, and what is proven of each."""
    from .releases import load_releases
    for name, release in load_releases().items():
        if not (args.all or release.get("cloud")):
            continue
        types = [t for t in ("binary", "source") if release.get(t)]
        versions = ", ".join(f"{p} {v}" for p, v in (release.get("source") or {}).items())
        proven = "\twhole cloud" if release.get("cloud") else "\tnot the whole cloud"
        print(f"{name}\t{release['series']}\t{'/'.join(types)}\t{versions}{proven if args.all else ''}")


def cmd_settings(args):
    """Every setting globals.yml may hold, its default and the file that declares it
    (a service's own settings are in its folder); with the operator's value where
    globals.yml sets one."""
    from .settings import declared_settings
    defaults, origin = declared_settings()
    path = Path(args.config_dir) / "globals.yml"
    operator = (safeyaml.load(path.read_text()) if path.exists() else None) or {}
    for key, default in defaults.items():
        shown = json.dumps(default)
        if key in operator and operator[key] != default:
            shown += f" (globals.yml: {json.dumps(operator[key])})"
        print(f"{key}: {shown}\t{Path(origin[key]).relative_to(paths.REPO)}")


def cmd_build(args):
    from .build import Builder, image_ref
    from .settings import settings_for_release
    settings = _settings(args)
    if args.release:
        _release(args.release)
        settings = settings_for_release(settings, args.release)
    if args.push and not settings.get("docker_registry"):
        raise ValidationError([f"{Path(args.config_dir) / 'globals.yml'}: docker_registry: not set; "
                               f"--push needs the registry (host:port) images are pushed to"])
    if not args.images and not args.all:
        from .roles import service_images
        args.images = service_images(settings)
        print(f"[build] the images of the enabled services: {', '.join(args.images)} (--all: every image)")
    builder = Builder(_client(), settings, out=lambda m: print(m, flush=True))
    result = builder.build(args.images or None, force=args.force)
    counts = {outcome: sum(1 for r in result.values() if r == outcome) for outcome in ("built", "tagged", "unchanged")}
    print("[build] done: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))
    if args.push:
        _push([image_ref(settings, name) for name in args.images or sorted(result)], builder.client, settings,
              args.master.netns if args.master else None)


def _push(refs, client, settings, netns):
    """Pushes three images at a time: each push mostly reads its image out of the
    engine and compresses its layers, one core's work (8 images here: 36 s one at a time,
    26 s). An image the registry holds already is not read out again."""
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from .build import push

    def timed(ref):
        begun = time.monotonic()
        copied = push(ref, client.images.get(ref).id, insecure=settings["docker_registry_insecure"], netns=netns)
        return copied, time.monotonic() - begun
    started, held = time.monotonic(), 0
    with ThreadPoolExecutor(3) as pool:
        pushes = {pool.submit(timed, ref): ref for ref in refs}
        for index, done in enumerate(as_completed(pushes), 1):
            copied, seconds = done.result()
            held += not copied
            print(f"[build] ({index}/{len(refs)}) " + (f"pushed {pushes[done]} ({seconds:.1f} s)" if copied else
                                                       f"{pushes[done]}: in the registry already"), flush=True)
    print(f"[build] pushed {len(refs) - held} image(s) to {settings['docker_registry']} ({held} there already) in "
          f"{time.monotonic() - started:.1f} s")


def _release(name):
    from .releases import load_releases
    releases = load_releases()
    if name not in releases:
        raise ValidationError([f"--release: unknown release '{name}' (known: {', '.join(releases)})"])
    return releases[name]


def _check_images(services):
    """Every image `services` run is on this host (kolla_salt.preflight.missing_images)."""
    from .preflight import missing_images
    missing = missing_images(_client(), services)
    if missing:
        raise ValidationError(missing)


def _check_release_paths(hosts, allow_jump):
    """Refuses, before anything changes, a release change OpenStack does not support
    (kolla_salt.releases.upgrade_path_problem) unless --allow-release-jump, which is
    said instead. `hosts`: {host (None: this host): (the services declared there,
    {container: the release it runs})}: what runs is known by the kolla.release
    label of its image (facts of a master's minions carry them too)."""
    from .preflight import judged_jumps
    from .releases import load_releases, release_path_problems
    releases = load_releases()
    problems, notes = judged_jumps([problem for host, (services, running) in hosts.items()
                                    for problem in release_path_problems(releases, services, running, host)],
                                   allow_jump)
    for note in notes:
        print(f"[deploy] {note}")
    if problems:
        raise ValidationError(problems)


def _check_here(services, allow_jump):
    from .releases import running_releases
    _check_release_paths({None: (services, running_releases(_client()))}, allow_jump)


def _check_through_master(hosts, facts, names, allow_jump, release=None):
    """The release paths of every host's `names` (all when empty; `hosts`: the
    declaration, Master.declaration), declared at `release` when given (an upgrade's
    --release, before it is declared)."""
    _check_release_paths({host: ([{**s, **({"release": release} if release else {})}
                                  for s in declared["services"] if not names or s["name"] in names],
                                 facts[host]["releases"]) for host, declared in hosts.items()}, allow_jump)


def _state_apply(args, settings, sls, extra_pillar=None, test=False):
    from .settings import load_passwords
    from .saltcall import salt_call
    cli_pillar = json.dumps(extra_pillar or {})
    salt_args = ["state.apply", sls, f"pillar={cli_pillar}"] + (["test=True"] if test else [])
    # Every password of passwords.yml is hidden from what is printed, not only those
    # this host's pillar holds (the ones its services use).
    code, data = salt_call(args.config_dir, settings["kolla_state_directory"], salt_args,
                           secrets=load_passwords(args.config_dir).values())
    return code, data


def summarise(data, out=print):
    """Prints what changed and what failed; returns (changed, failed, total)."""
    if not isinstance(data, dict):
        out(str(data))
        return 0, 1, 0
    changed = failed = 0
    for _, ret in sorted(data.items(), key=lambda item: item[1].get("__run_num__", 0)):
        if ret.get("result") is False:
            failed += 1
            out(f"FAILED  {ret.get('name')}: {ret.get('comment')}")
        elif ret.get("changes"):
            changed += 1
            word = "WOULD" if ret.get("result") is None else "changed"
            out(f"{word:7} {ret.get('name')}: {ret.get('comment')}")
            for key, value in ret["changes"].items():
                out(f"          {key}: {value}")
    return changed, failed, len(data)


def cmd_deploy(args):
    if args.master:
        facts = args.master.preflight()
        hosts = args.master.declaration(facts)
        names = _selected_names(hosts, args.services)
        if not names or "mariadb" in names:
            args.master.check_galera(facts, hosts)
        return _orchestrate(args, "kolla.deploy", facts, hosts, names, predict=True)
    return _deploy(args)


def cmd_rotate_keys(args):
    """Rotates the key repositories that rotate (keystone's fernet keys): the staged key
    becomes the primary one, a new key is staged; then deploys their services, which
    writes the new keys on every host. Refused while some host does not hold the
    current keys yet (its deploy did not reach it): the key made primary now must have
    been on every host as the staged one ("distribute before use")."""
    from . import keys
    declared = args.master.declaration(args.master.preflight()) if args.master \
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
    from .tree import service_order
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
    answers --test, and a deploy that would change nothing, without a walk."""
    from .pins import load_pins
    from .master import host_returns, step_failure, step_note, step_timing
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
        from .clouds import write_client_files
        from .settings import load_passwords
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


def _host_settings(args, interfaces=None):
    """A host's settings with its facts (addresses), as its pillar holds them, without
    compiling the pillar (the deploy's salt-call does): this host's, or the one with
    `interfaces` (a minion's, from its facts)."""
    from .hostfacts import host_facts, interface_address, local_interfaces
    warnings = []
    settings = _settings(args, warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return {**settings, **host_facts(settings, interface_address(settings, interfaces or local_interfaces()))}


def _deploy(args, extra_pillar=None):
    """A deploy on this host: salt-call --local state.apply kolla.deploy, the pillar
    compiled once, by Salt (with `extra_pillar`); the run's first states refuse it
    (_refused) before anything changes."""
    from .pins import load_pins
    from .settings import load_passwords
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
        from .clouds import write_client_files
        for path in write_client_files(args.config_dir, settings, load_passwords(args.config_dir)):
            print(f"[deploy] wrote {path}")
    if not args.test:
        _ensure_health_loop(args, settings, "deploy")
    return 0 if ok else 1


def _ensure_health_loop(args, settings, command):
    """After containers changed, the loop watches them (whatever the outcome:
    a failed upgrade leaves the restored containers to watch)."""
    schedule = healthloop.backup_schedule(settings, args.config_dir)
    if not settings["enable_health_loop"] and not schedule:
        if healthloop.stop_health_daemon(settings):
            print(f"[{command}] health loop: stopped (enable_health_loop is false)")
        return
    daemon = healthloop.ensure_health_daemon(settings, config_dir=args.config_dir)
    print(f"[{command}] health loop: {'started' if daemon['started'] else 'running'} (pid {daemon['pid']}, "
          + (f"check every {settings['health_check_interval']} s, restart after "
             f"{settings['health_failure_threshold']} failures" if settings["enable_health_loop"]
             else "no checks: enable_health_loop is false")
          + (f"; a database backup when the newest is {settings['mariadb_backup_interval_minutes']} minutes old, "
             f"{settings['mariadb_backups_kept']} scheduled ones kept" if schedule else "")
          + f"; log {healthloop.daemon_root(settings) / 'minion.log'})")


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
    if args.master:
        facts = args.master.preflight()
        old = args.master.declaration(facts)
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
    if args.master:   # each host's engine is its own: what runs there came with its facts
        _check_through_master(old, facts, names, args.allow_release_jump, args.release)
    new, hosts = [], {}

    def check():
        """The new declaration before it is kept (refused: taken back): through a master
        where its services run and every host's pillar, on one host what it names (a
        release jump refused, an allowed one the deploy that follows says)."""
        if args.master:
            _validate_declaration(args.config_dir, args.master)
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
    from .build import Builder, image_folder
    from .settings import settings_for_release
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
    from .backup import changing_releases
    changing = set().union(*(changing_releases([s for s in declared["services"] if s["name"] in names],
                                                facts[host]["releases"]) for host, declared in hosts.items()))
    if changing and args.master.members("mariadb", facts)[0]:
        _backup(args, f"before the upgrade to {', '.join(sorted(changing))} (kolla-salt upgrade)")


def _declaration_files(config_dir):
    """{file: its text, None when absent} of the declared state (globals.yml, pins.yml),
    to put back when a command is refused (_undeclared)."""
    from .pins import load_pins
    return {path: path.read_text() if path.exists() else None
            for path in (Path(config_dir) / "globals.yml", load_pins(config_dir).path)}


def _undeclared(config_dir, files):
    """Puts the declared state back as `files` (_declaration_files) held it."""
    now = _declaration_files(config_dir)
    changed = {file: text for file, text in files.items() if now[file] != text}
    for file, text in changed.items():
        if text is None:
            file.unlink(missing_ok=True)
        else:
            file.write_text(text)
    if changed:
        print(f"[declared] {', '.join(map(str, changed))}: taken back, as before this command")


def _validate_declaration(config_dir, master=None):
    """The declaration validates: through a master where its services run
    (kolla_salt.roles.placement), on one host its pillar (returned)."""
    from .inventory import build_pillar
    from .roles import placement
    if master:
        return placement(config_dir)
    return build_pillar(config_dir, minion_id=socket.gethostname())


@contextlib.contextmanager
def _declaring(config_dir, check=None, master=None):
    """Changes the declared state: yields (the operator's globals.yml as a dict, the
    Pins) for the body to change, then writes both, printing what changed. If the
    new declaration does not pass `check()` (by default _validate_declaration), both
    files are put back and the error raised: a command refused leaves nothing
    changed."""
    from .pins import load_pins
    path = Path(config_dir) / "globals.yml"
    before = _declaration_files(config_dir)
    user_globals = (safeyaml.load(before[path]) if before[path] else None) or {}
    pins = load_pins(config_dir)
    old_globals, old_pins = dict(user_globals), pins.describe()
    yield user_globals, pins
    try:
        if user_globals != old_globals:
            for key in sorted(set(user_globals) | set(old_globals)):
                if user_globals.get(key) != old_globals.get(key):
                    print(f"[declared] {path}: {key}: {old_globals.get(key)!r} -> {user_globals.get(key)!r}")
            path.write_text(yaml.safe_dump(user_globals, default_flow_style=False, sort_keys=False))
        if pins.describe() != old_pins:
            pins.save()
            for line in pins.describe() or ["(no pins)"]:
                print(f"[declared] {pins.path}: {line}")
        if check:
            check()
        else:
            _validate_declaration(config_dir, master)
    except BaseException:
        _undeclared(config_dir, before)
        raise


def cmd_status(args):
    """What runs on each host (kolla_container.status), in the set tree; what pins.yml
    holds; the health loop."""
    from .pins import load_pins
    from .status import render, render_hosts
    settings = _settings(args)
    tls, pins = _certificate_status(args, settings), load_pins(args.config_dir)
    found = _road(args).ask_all("kolla_container.status")
    hosts = {host: ret for host, ret in found.items() if isinstance(ret, dict) and "containers" in ret}
    silent = {host: f"its Docker engine does not answer ({ret['engine_error']})" if isinstance(ret, dict)
              else ret or "its salt-minion does not answer the master"
              for host, ret in found.items() if host not in hosts}
    said_pins = {"services": pins.services, "containers": pins.containers}
    if args.master:
        if args.format == "json":
            print(json.dumps({"hosts": hosts, "not_answering": silent, "tls_certificates": tls, "pins": said_pins},
                             indent=2))
        else:
            print(render_hosts(hosts, silent, pins.describe()) + _said_certificate(tls))
    elif silent:
        raise KollaError(f"status: this host's Docker engine does not answer ({found[None]['engine_error']})")
    elif args.format == "json":
        print(json.dumps({**hosts[None], "tls_certificates": tls, "pins": said_pins}, indent=2))
    else:
        print(render(hosts[None]["containers"], hosts[None]["health_loop"], pins.describe()) + _said_certificate(tls))
    return 1 if silent else 0


def _certificate_status(args, settings):
    """Each certificate served (kolla_enable_tls_external, _internal, _backend): its
    expiry and whether it is due for renewal, or what is wrong with it."""
    from . import certificates
    folder = certificates.certificates_dir(settings, args.config_dir)
    settings = _with_api_addresses(args, settings)
    found = []
    for endpoint in certificates.enabled(settings):
        try:
            path, _, expiry = certificates.checked(settings, args.config_dir, endpoint)
        except ValidationError as error:
            found.append({"file": str(folder / endpoint.pem), "problems": error.problems})
            continue
        found.append({"file": str(path), "valid_until": expiry.isoformat(), "renew": certificates.expiring(expiry)})
    return found


def _said_certificate(tls):
    return "".join(
        f"\nTLS certificate {found['file']}: " + ("; ".join(found["problems"]) if "problems" in found else
                                                  f"valid until {found['valid_until'][:10]}"
                                                  + (" (within 30 days: `kolla-salt certificates --renew`, then "
                                                     "deploy)" if found["renew"] else ""))
        for found in tls)


def _host_and_container(args):
    """HOST:CONTAINER, as `logs` and `rollback` take them through a master."""
    host, _, container = args.container.partition(":")
    if not container or not host:
        raise ValidationError([f"{args.command}: through a master, name the host: HOST:CONTAINER "
                               f"(got '{args.container}')"])
    return host, container


def cmd_logs(args):
    """A container's stdout/stderr (docker logs); the service's own log files are
    under <kolla_log_directory>/<service>/ on the host."""
    if args.follow:
        return _follow_logs(args)
    host, name = _host_and_container(args) if args.master else (None, args.container)
    found = _one_host(args, host, "kolla_container.logs", name, *([args.tail] if args.tail is not None else []))
    if found is None:
        raise KollaError(f"logs: no container named {name}{f' on {host}' if host else ''}")
    if not isinstance(found, dict):
        raise KollaError(f"logs: {_on(host)}{_refusal_of(found)}")
    sys.stdout.write(found["logs"])
    return 0


def _follow_logs(args):
    """`logs --follow`: streamed from this host's engine (Salt returns once, when a
    function ends; polling through salt-call would cost a second of CPU a call), the
    passwords redacted line by line as kolla_container.logs does."""
    from .containers import ContainerManager
    from .private import redacted_lines
    from .settings import load_passwords
    if args.master:
        raise ValidationError(["logs --follow: on the container's own host only (through a master, "
                               "`logs HOST:CONTAINER` without --follow)"])
    settings = _settings(args)
    from .spec import named
    container = named(args.container, settings["container_name_prefix"],
                      ContainerManager.from_settings(settings, client=_client()).get)[1]
    if container is None:
        raise KollaError(f"logs: no container named {args.container}")
    for line in redacted_lines(container.logs(stream=True, follow=True,
                                              tail=args.tail if args.tail is not None else "all"),
                               load_passwords(args.config_dir).values()):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def cmd_history(args):
    """What ran before: every generation of a container, oldest first (no spec
    values: they may hold secrets)."""
    import datetime

    from .generations import History
    settings = _settings(args)
    from .spec import named
    records = named(args.container, settings["container_name_prefix"],
                    lambda name: History(settings["kolla_state_directory"], name).records())[1]
    if records is None:
        raise KollaError(f"history: no generation of a container named {args.container} is recorded "
                         f"under {settings['kolla_state_directory']}")

    def when(epoch):
        return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")

    rows = [{"generation": r["generation"], "outcome": r["outcome"], "image": r["image"],
             "image_id": r["image_id"][7:19], "config_hash": r["config_hash"], "created": when(r["created"]),
             # restarts by the health loop: same generation, same container
             "restarts": [{"at": when(x["at"]), "verdict": x["verdict"]} for x in r.get("restarts", [])]}
            for r in records]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return
    print(f"{'gen':>4}  {'outcome':<9} {'created':<23} {'image id':<12} {'config':<16} image")
    for row in rows:
        print(f"{row['generation']:>4}  {row['outcome']:<9} {row['created']:<23} {row['image_id']:<12} "
              f"{row['config_hash']:<16} {row['image']}")
        for restart in row["restarts"]:
            print(f"{'':>4}  {'restarted':<9} {restart['at']:<23} by the health loop ({restart['verdict']})")


def cmd_rollback(args):
    """A container (or, on one host, a set's containers in reverse order) back to its
    last known good generation, pinned in pins.yml: kolla_container.rollback_target
    and rollback on its host, through a master (HOST:CONTAINER) or on this one."""
    if args.release:
        return _rollback_release(args)
    if args.master:
        if not args.container:
            raise ValidationError(["rollback: through a master, name one container: HOST:CONTAINER"])
        host, name = _host_and_container(args)
        names = [name]
    else:
        host = None
        names = [args.container] if args.container else _set_containers(args)[::-1]   # a set: reverse order

    def on_host(function, name):
        found = _one_host(args, host, function, name)
        if not isinstance(found, dict):
            raise KollaError(f"rollback: {_on(host)}{_refusal_of(found)}")
        return found
    # Every target is known (or the rollback refused) before anything changes. A set's
    # container with no earlier generation did not change since: it stays as it is.
    targets = {}
    for name in names:
        found = on_host("kolla_container.rollback_target", name)
        if "none" in found and args.container:
            raise NoEarlierGeneration(found["none"])
        if "none" in found:
            print(f"[rollback] {found['name']}: left as it is, {found['none'].removeprefix('rollback: ')}",
                  flush=True)
        else:
            targets[found["name"]] = found
    try:
        for name, found in targets.items():
            def rollback(name=name):
                done = on_host("kolla_container.rollback", name)
                return done["returned_to"], done["generation"]
            _declare_rollback(args, f"{host}:{name}" if host else name, found["generation"], rollback, found["pin"])
    finally:
        if not args.master:
            _ensure_health_loop(args, _settings(args), "rollback")
    print("[rollback] pins.yml keeps this at the next deploy; `kolla-salt unpin NAME` lets it follow "
          "globals.yml again")
    return 0


def _declare_rollback(args, key, target, rollback, facts):
    """Declares the rollback (pins.yml holds the container at generation `target`, what
    the good generation ran, with its `facts`: kolla_salt.pins.pin_facts) before swapping, so a
    rollback killed half-way is completed by the next deploy; a rollback that fails
    takes its pin back."""
    import datetime
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with _declaring(args.config_dir, master=args.master) as (_, pins):
        before = pins.containers.get(key)
        pins.containers[key] = {"generation": target, "why": f"rollback, {when}", **facts}
    try:
        target, new = rollback()
    except KollaError:
        with _declaring(args.config_dir, master=args.master) as (_, pins):
            if before is None:
                pins.containers.pop(key)
            else:
                pins.containers[key] = before
        raise
    print(f"[rollback] {key}: generation {new} runs what generation {target} ran")


def cmd_unpin(args):
    """Removes pins (pins.yml): a service follows openstack_release again, a container
    (on any host: HOST:CONTAINER) its declared spec; the next deploy converges to
    globals.yml. pins.yml alone says what is pinned: no host is asked."""
    from .tree import service_order
    prefix = _settings(args)["container_name_prefix"]
    services = {service for _, service in service_order()}
    with _declaring(args.config_dir, master=args.master) as (_, pins):
        for name in args.names:
            removed = pins.release(name, services, _service_of) or pins.release(prefix + name, services, _service_of)
            if not removed:
                raise ValidationError([f"unpin: nothing in {pins.path} is pinned as '{name}'"
                                       f" (pins: {'; '.join(pins.describe()) or 'none'})"])
            print(f"[unpin] {name}: removed {', '.join(removed)}")
    print("[unpin] run `kolla-salt deploy` to converge to globals.yml")


def _service_of(container_name):
    """The service a container deployed on this host belongs to (its set label), or
    None: for the pins an earlier kolla-salt wrote without their service."""
    import docker.errors
    from .spec import LABEL_SET
    if ":" in container_name:   # HOST:CONTAINER: held on another host
        return None
    try:
        return _client().containers.get(container_name).labels.get(LABEL_SET, "").rsplit("/", 1)[-1]
    except docker.errors.DockerException:   # not here, or no engine here (a master's own host)
        return None


def _set_containers(args):
    """Containers of a set (top-level or service) on this host, in tree order."""
    found = _road(args).ask_all("kolla_container.status")[None].get("containers", [])
    rows = [r for r in found if in_set(r["set"], args.set)]
    if not rows:
        raise ValidationError([f"--set: no deployed container belongs to a set named '{args.set}'"])
    return [r["name"] for r in rows]


def cmd_stop(args):
    """Stops the running containers of this deployment (all, or those of --services),
    on this host or, through a master, on every host; stopping all on a host also
    stops its health loop. `deploy` starts them again."""
    for host, done in _on_every_host(args, "stop", json.dumps(_split(args.services))).items():
        if done["health_loop_stopped"]:
            print(f"[stop] {_on(host)}health loop stopped")
        for name in done["stopped"]:
            print(f"[stop] {_on(host)}{name} stopped")


def cmd_destroy(args):
    """Removes this deployment's containers (history says so: `rollback` can still
    return to what ran), on this host or, through a master, on every host; volumes
    only when asked. pins.yml is declared state and stays."""
    plans = _on_every_host(args, "destroy_plan")
    if not args.yes_i_really_mean_it:
        for host, plan in plans.items():
            volumes = plan["volumes"]
            print(f"This removes {_on(host)}{len(plan['containers'] + plan['jobs'])} container(s)"
                  + (f" and {len(volumes)} volume(s) with their data" if args.remove_volumes else
                     f" (volumes with data are kept: {', '.join(volumes) or 'none'})"))
            for name, command in plan["endings"].items():
                print(f"  first, in {name}: {' '.join(command)}")
        if not _confirmed(args):
            return 1
    # (the modules were synced for the plan: no second round)
    for host, done in _on_every_host(args, "destroy", f"remove_volumes={args.remove_volumes}", synced=True).items():
        if done["health_loop_stopped"]:
            print(f"[destroy] {_on(host)}health loop stopped")
        for name, said in done["ended"].items():
            print(f"[destroy] {_on(host)}{name}: {said}")
        print(f"[destroy] {_on(host)}removed {len(done['containers'] + done['jobs'])} container(s)"
              + (f" and {len(done['volumes'])} volume(s)" if args.remove_volumes else ""))
    return 0


def _road(args):
    """Where a host action goes: through the master to every host, or to this host as
    a master of one (salt-call --local). Either calls the same kolla_container function.
    Made once per command (one host's reads and validates the operator's files)."""
    if args.master:
        return args.master
    if getattr(args, "here", None) is None:
        from .saltcall import Here
        from .settings import load_passwords
        args.here = Here(args.config_dir, _settings(args)["kolla_state_directory"],
                         load_passwords(args.config_dir).values())
    return args.here


def _one_host(args, host, function, *function_args):
    """FUNCTION's return on `host` (None: this one) through _road; fails when a
    master's host does not answer."""
    found = _road(args).returns(host, function, *function_args, timeout=600)
    if host not in found:
        raise KollaError(f"{args.command}: host {host} does not answer the master")
    return found[host]


def _on(host):
    """The prefix naming the host a line is about (none on one host)."""
    return f"{host}: " if host else ""


def _host_name(host):
    """A host in a sentence: its name, or `this host` on one host (None, _road's key)."""
    return host or "this host"


def _on_every_host(args, action, *action_args, synced=False):
    """{host: its return} of kolla_container.ACTION on every host (_road), through a
    master the hosts running older Salt modules synced first (unless `synced`); fails
    naming the hosts that did not do it (the others did: each host's part is whole on
    its own, and the same command again completes the rest)."""
    if args.master and not synced:
        args.master.host_facts()
    found = _road(args).ask_all(f"kolla_container.{action}", *action_args, timeout=600)
    failed = {host: ret for host, ret in found.items() if not isinstance(ret, (dict, list))}
    if failed:
        raise KollaError(f"{action}: " + "; ".join(
            f"{host}: {str(ret).strip().splitlines()[-1] if ret else 'its salt-minion does not answer the master'}"
            for host, ret in sorted(failed.items())))
    return found


def cmd_mariadb_recovery(args):
    """Brings a Galera cluster back after every member stopped: finds the member with
    the highest committed position, bootstraps from it, rejoins the others one at a
    time (salt/_runners/kolla_galera.py)."""
    if not args.master:
        raise ValidationError(["mariadb-recovery: Galera runs on several hosts; give --master DIR or --lab NAME"])
    members, step = args.master.members("mariadb", args.master.preflight())
    if len(members) < 2:
        raise ValidationError([f"{args.config_dir}/globals.yml: mariadb runs on {', '.join(members) or 'no host'}: "
                               f"a Galera cluster needs at least 2 hosts (roles.mariadb or the control role)"])
    print(f"[mariadb-recovery] stopping the members on {', '.join(members)}, reading their committed positions",
          flush=True)
    ok, result = args.master.run("kolla_galera.recover", target=step["target"])
    result = result if isinstance(result, dict) else {"error": str(result)}
    for host, found in sorted((result.get("positions") or {}).items()):
        print(f"[mariadb-recovery] {host}: " + (f"seqno {found['seqno']} of cluster {found['uuid']}"
                                                if found.get("data") else "no data"))
    if result.get("plan"):
        print(f"[mariadb-recovery] bootstrapping from {result['plan']['bootstrap']}, then "
              f"{', '.join(result['plan']['order'][1:])} one at a time")
    failed = 0
    for host, states in sorted((result.get("ret") or {}).items()):
        failed += summarise(states, out=lambda line, host=host: print(f"{host}: {line}"))[1]
    if result.get("error") or not ok:
        print(f"[mariadb-recovery] FAILED: {result.get('error') or 'salt-run kolla_galera.recover failed'}")
        return 1
    print(f"[mariadb-recovery] the cluster is back: {len(members)} members Synced in {result.get('seconds')} s")
    return 0 if failed == 0 else 1


def _backup(args, why, incremental=False):
    """Takes a backup of the database, through a master (the runner kolla_galera) or on
    this host as a master of one (kolla_backup.take_here through salt-call); returns
    its manifest. `why` goes as JSON: Salt reads a bare argument as YAML."""
    if args.master:
        return _backup_through_master(args, why, incremental)
    return _road(args).ask_all("kolla_backup.take_here", json.dumps(why), incremental)[None]


def _database_members(args, facts=None):
    """(the hosts of mariadb, its placement target): through a master its minions, on
    one host [None] (this host) when mariadb is enabled."""
    if not args.master:
        if not _settings(args)["enable_mariadb"]:
            raise ValidationError([f"{args.config_dir}/globals.yml: mariadb is not deployed on this host "
                                   f"(enable_mariadb)"])
        return [None], None
    members, step = args.master.members("mariadb", facts or args.master.preflight())
    if not members:
        raise ValidationError([f"{args.config_dir}/globals.yml: mariadb runs on no host (enable_mariadb, roles)"])
    return members, step["target"]


def _host_facts(args):
    """{host: its kolla_container.facts}: through a master after its checks before a
    change (Master.preflight), or this host's (keyed None)."""
    return args.master.preflight() if args.master else _road(args).host_facts()


def _backup_through_master(args, why, incremental=False):
    """kolla_galera.backup: the last Synced member is copied, desynced meanwhile; its
    manifest (the backup stays on that host, the secrets on the master)."""
    from .backup import master_secrets
    _, target = _database_members(args)
    print(f"[mariadb-backup] copying the last Synced member of {target}", flush=True)
    ok, result = args.master.run("kolla_galera.backup", target=target, why=json.dumps(why), incremental=incremental,
                                 timeout=3700)
    result = result if isinstance(result, dict) else {"error": str(result)}
    if result.get("error") or not ok or not result.get("manifest"):
        raise KollaError(result.get("error") or "salt-run kolla_galera.backup failed")
    manifest = result["manifest"]
    print(f"[mariadb-backup] {result['host']}: backup {manifest['name']} ({manifest['archive']['bytes'] >> 20} MiB "
          f"in {manifest['seconds']} s" + (", the member desynced meanwhile" if manifest.get("desynced") else "")
          + f"); the secrets its data needs: {master_secrets(args.config_dir, manifest['name'])}", flush=True)
    return {**manifest, "host": result["host"]}


def cmd_mariadb_backup(args):
    """A backup of the database (kolla_salt.backup), or the list of those kept."""
    from .backup import backup_directory
    if args.list and args.incremental:
        raise ValidationError(["--list, --incremental: one or the other"])
    if args.list:
        directory = backup_directory(_settings(args))
        for host, found in _backups_listed(args, _database_members(args)[0]).items():
            print(f"backups in {directory}{f' on {host}' if host else ''}: {len(found)}")
            for manifest in found:
                kind = f"incremental of {manifest['base']}" if manifest["kind"] == "incremental" else "full"
                print(f"{manifest['name']}\t{kind}\t{manifest['archive']['bytes'] >> 20} MiB\t"
                      f"{manifest['seconds']} s\t{', '.join(sorted(set(manifest['releases'].values()))) or '-'}\t"
                      f"{manifest['why']}")
        return 0
    manifest = _backup(args, "asked (kolla-salt mariadb-backup)", incremental=args.incremental)
    print(f"[mariadb-backup] {manifest['name']}: restore with `kolla-salt mariadb-restore {manifest['name']}`")
    return 0


def _backups_listed(args, members):
    """{host: the manifests of its backups} of the database's hosts `members` ([None]:
    this host) through _road (kolla_backup.list)."""
    found = _road(args).returns(members, "kolla_backup.list", timeout=60)
    silent = [h for h in members if not isinstance(found.get(h), list)]
    if silent:
        raise KollaError("mariadb-backup: " + ", ".join(map(_host_name, silent))
                         + " did not list their backups ("
                         + "; ".join(_refusal_of(found.get(h)).splitlines()[-1] for h in silent) + ")")
    return {h: found[h] for h in members}


def _confirmed(args):
    """--yes-i-really-mean-it, or the operator types yes."""
    if args.yes_i_really_mean_it:
        return True
    try:
        answer = input("Type 'yes' to go on: ").strip()
    except EOFError:
        answer = ""
    if answer != "yes":
        print(f"{args.command}: nothing done")
    return answer == "yes"


def _restore_checked(args, members, host, name, releases):
    """The manifest of backup `name` of `host` (None: this host) once its files check
    out there (kolla_backup.find), it fits containers at `releases` and the operator
    folder's secrets, and the operator agreed, told what the restore forgets while it
    lives on (kolla_backup.forgotten); ValidationError naming the problems, or None if
    not agreed. `members`: the database's hosts."""
    from .backup import backup_directory, master_secrets, release_problems, secret_problems
    manifest = _one_host(args, host, "kolla_backup.find", json.dumps(name))
    if not isinstance(manifest, dict):
        raise ValidationError([f"{_on(host)}{_refusal_of(manifest)}"])
    # Through a master the secrets stay beside the operator folder; on one host, beside the backup.
    secrets = master_secrets(args.config_dir, name).parent if args.master else backup_directory(_settings(args)) / name
    problems = release_problems(manifest, releases) + secret_problems(manifest, args.config_dir, secrets)
    if problems:
        raise ValidationError(problems)
    whose = f"every member ({', '.join(members)})" if host else "this host"
    print(f"This puts back the database of {whose} as "
          f"backup {name}{f' of {host}' if host else ''} holds it ({manifest['taken']}, {manifest['why']}): "
          f"everything written since is lost, though a backup of the data it replaces is taken first. The services "
          f"that write to it are stopped meanwhile"
          + ("; the other members are emptied and copy the restored one." if len(members) > 1 else "."))
    found = _one_host(args, host, "kolla_backup.forgotten", json.dumps(name))
    if not isinstance(found, dict):
        raise KollaError(f"{_on(host)}{_refusal_of(found)}")
    for what, (why, each) in found.items():
        print(f"  {what} {why}: {', '.join(each)}")
    return manifest if _confirmed(args) else None


def _refusal_of(ret):
    """Why a host did not do what it was asked, from its return (a minion says a
    refusal as "ERROR: why"; None: it did not answer)."""
    return str(ret).strip().removeprefix("ERROR: ") if ret else "no answer"


def _restored(args, target, host, name, first=(), writers_back=True):
    """A backup of what it replaces, then the restore of backup `name` of `host`: the
    writers stopped (after the services `first` names), the datadir and the job
    records restored. On one host kolla_backup.restore_here through salt-call, which
    starts the member and, `writers_back`, the writers again (a release rollback's
    deploy starts them at the older release), the health loop's restarts paused
    meanwhile; through a master the runner kolla_galera.restore, which founds the
    cluster again from `host` (`target`: the members' placement, _database_members),
    and a deploy after it starts the writers. Returns the
    manifest of the backup of what it replaced, or None when it failed (said)."""
    before = _backup(args, f"before restoring {name} (kolla-salt {args.command})")
    if not args.master:
        with healthloop.ledger(_settings(args)).paused_restarts():
            _road(args).ask_all("kolla_backup.restore_here", json.dumps(name), json.dumps(args.command),
                                writers_back, json.dumps(list(first)))
        return before
    print(f"[{args.command}] stopping the writers and the members, restoring on {host}", flush=True)
    ok, result = args.master.run("kolla_galera.restore", target=target, host=json.dumps(host),
                                 name=json.dumps(name), first=json.dumps(list(first)), timeout=3700)
    result = result if isinstance(result, dict) else {"error": str(result)}
    for each, names in sorted((result.get("stopped") or {}).items()):
        print(f"[{args.command}] {each}: stopped {', '.join(names) if isinstance(names, list) else names}")
    for line in result.get("said") or []:
        print(f"[{args.command}] {host}: {line}")
    for each, states in sorted((result.get("ret") or {}).items()):
        summarise(states, out=lambda line, each=each: print(f"{each}: {line}"))
    if result.get("error") or not ok:
        print(f"[{args.command}] FAILED: {result.get('error') or 'salt-run kolla_galera.restore failed'}")
        return None
    print(f"[{args.command}] the members hold backup {name} ({result.get('seconds')} s); the deploy starts the "
          f"writers again", flush=True)
    return before


def cmd_mariadb_restore(args):
    """Puts the database back as backup NAME holds it: checks first, takes a backup of
    what it replaces, stops the services that write to the database, restores the
    datadir, starts them again (docs/operations.md: "Database backups"); through a
    master the cluster is founded again from the member holding it."""
    from .backup import host_releases
    facts = _host_facts(args)
    members, target = _database_members(args, facts)
    kept = _backups_listed(args, members)
    # One host's kolla_backup.find says why a backup it does not list is not whole.
    host = next((h for h in members if any(m["name"] == args.backup for m in kept[h])),
                members[0] if len(members) == 1 else False)
    if host is False:
        raise ValidationError([f"{args.backup}: no such backup on {', '.join(map(_host_name, members))} (backups: "
                               + "; ".join(f"{_on(h)}{', '.join(m['name'] for m in kept[h]) or 'none'}"
                                           for h in members) + ")"])
    if _restore_checked(args, members, host, args.backup, host_releases(facts)) is None:
        return 1
    started = time.monotonic()
    before = _restored(args, target, host, args.backup)
    if before is None:
        return 1
    code = 0
    if args.master:
        args.services, args.test = None, False
        code = _orchestrate(args, "kolla.deploy", facts, args.master.declaration(facts), [])
    print(f"[{args.command}] {'the database holds' if code == 0 else 'FAILED to bring back the services on'} backup "
          f"{args.backup} ({time.monotonic() - started:.0f} s); what it replaced is backup {before['name']}"
          + (f" of {before['host']}" if before.get("host") else ""))
    return code


def _rollback_release(args):
    """rollback --release OLD, after an upgrade from OLD: the database as the newest
    backup taken under OLD holds it (the upgrade took one before its migrations), then
    every container at OLD; through a master the Galera cluster is founded again from
    the member holding that backup, and every host deploys. Declared first
    (openstack_release): killed half way, the same command completes it."""
    from .backup import host_releases, release_problems, taken_at
    _release(args.release)
    facts = _host_facts(args)
    members, target = _database_members(args, facts)
    running = host_releases(facts)
    _newer_than(running, args.release)
    back = {key: args.release for key in running}
    kept = _backups_listed(args, members)
    fitting = sorted(((taken_at(m), h, m["name"]) for h in members for m in kept[h] if not release_problems(m, back)),
                     key=lambda found: found[0])
    if not fitting:
        raise ValidationError([f"--release {args.release}: no backup on {', '.join(map(_host_name, members))} was "
                               f"taken under {args.release} (an upgrade takes one before its migrations): the "
                               f"database cannot go back with the containers, so nothing was changed"])
    _, host, name = fitting[-1]
    if _restore_checked(args, members, host, name, back) is None:
        return 1
    started = time.monotonic()
    hosts = {}

    def check():
        """The whole declaration validates before the database goes back: every host's
        pillar. On one host it is kept for what stops first, and the images of the
        release gone back to must be here (a master's hosts pull theirs)."""
        compiled = _validate_declaration(args.config_dir, args.master)
        if args.master:
            return hosts.update(args.master.declaration(facts))
        hosts[None] = {"services": compiled["kolla"]["services"]}
        _check_images(hosts[None]["services"])
    with _declaring(args.config_dir, check) as (user_globals, pins):
        user_globals["openstack_release"] = args.release
        pins.services.clear()
        pins.containers.clear()
    first = _stopped_first(args, _all_services(hosts), _settings(args),
                           {key.split(":", 1)[-1]: release for key, release in running.items()})
    before = _restored(args, target, host, name, first, writers_back=False)
    if before is None:
        return 1
    args.services, args.test = None, False
    args.allow_release_jump = f"the database went back to backup {name}"
    if args.master:
        _check_through_master(hosts, facts, [], args.allow_release_jump)
        code = _orchestrate(args, "kolla.deploy", facts, hosts, [])
    else:
        code = _deploy(args)
    print(f"[rollback] {'the cloud runs' if code == 0 else 'FAILED to bring back'} {args.release} with the database "
          f"of backup {name}{f' of {host}' if host else ''} ({time.monotonic() - started:.0f} s); what it replaced "
          f"is backup {before['name']}" + (f" of {before['host']}" if before.get("host") else ""))
    return code


def _stopped_first(args, services, settings, running):
    """rollback --release: the services that stop before the writers
    (kolla_salt.backup.back_first; `running`: {container: its release}), said. The
    deploy after the restore starts them at the older release, after the services
    they talk to."""
    from .backup import back_first
    first = back_first(services, settings["container_name_prefix"],
                       {name for name, release in running.items() if release != args.release})
    if first:
        print(f"[rollback] {', '.join(reversed(first))} stop first, then the services that write to the database "
              f"(the reverse of the upgrade's order); they start again at {args.release} once the database is "
              f"back", flush=True)
    return first


def _newer_than(running, release):
    """Refused when nothing of `running` ({container: release}) is newer than `release`
    (`rollback --release` goes back after an upgrade)."""
    from .releases import load_releases, series
    releases = load_releases()
    newer = sorted({r for r in running.values() if series(releases, r) > series(releases, release)})
    if not newer:
        raise ValidationError([f"--release: nothing runs a release newer than {release}: `rollback --release` goes "
                               f"back after an upgrade (`upgrade --release` goes forward)"])


def cmd_init_runonce(args):
    """What the deployed cloud needs before its first server (kolla_salt.runonce)."""
    import ipaddress
    from .build import Builder, image_ref
    import shlex
    from .clouds import clouds_file_problem
    from .runonce import client_command, init_runonce, openstack
    problems = []
    try:
        ipaddress.ip_network(args.cidr)
    except ValueError as error:
        problems.append(f"--cidr: {error}")
    public_key = None
    if args.public_key:
        try:
            public_key = Path(args.public_key).read_text()
        except OSError as error:
            problems.append(f"--public-key: {args.public_key}: {error.strerror}")
    clouds_problem = clouds_file_problem(args.config_dir)
    if clouds_problem:
        problems.append(clouds_problem)
    if problems:
        raise ValidationError(problems)
    settings, client = _settings(args), _client()
    image = image_ref(settings, "guest")
    print(f"[init-runonce] the guest's image {image} (built if it is not)", flush=True)
    Builder(client, settings, out=lambda m: print(m, flush=True)).build(["guest"])
    server_create = init_runonce(lambda *a, values=True: openstack(args.config_dir, *a, values=values), client,
                                 image, args.prefix, args.cidr, public_key,
                                 Path(args.config_dir) / f"{args.prefix}key.pem", out=lambda m: print(m, flush=True))
    environment, argv = client_command(args.config_dir, *server_create)
    print("Boot a server:  " + " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items()) + " "
          + shlex.join(argv))


def cmd_compute(args):
    """A compute host emptied of its servers, or taking them again (kolla_salt.compute)."""
    from .compute import Compute, connect
    if args.timeout <= 0:
        raise ValidationError([f"--timeout: {args.timeout}: must be a positive number of seconds"])
    compute = Compute(connect(args.config_dir), out=lambda m: print(m, flush=True))
    if args.action == "drain":
        compute.drain(args.host, timeout=args.timeout)
    else:
        compute.undrain(args.host)


def cmd_lab(args):
    """The lab of hosts on one machine (kolla_salt.lab)."""
    from .lab import Lab
    lab = Lab(args.name, args.hosts, out=lambda m: print(m, flush=True))
    if args.action == "up":
        described = lab.up()
        print(json.dumps(described, indent=2) if args.format == "json" else "[lab] hosts: " + ", ".join(
            f"{h['name']} {h['address']} (DOCKER_HOST={h['docker_host']})" for h in described["hosts"]))
    elif args.action == "down":
        lab.down()
    else:
        answering = lab.ping()
        for host in lab.describe()["hosts"]:
            print(f"{host['name']}\t{host['address']}\t{'answers' if host['name'] in answering else 'not answering'}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="kolla-salt", description=__doc__)
    parser.add_argument("--config-dir", default=str(paths.config_dir()),
                        help="operator folder with globals.yml, passwords.yml, config/ "
                             "(default: $KOLLA_SALT_CONFIG_DIR or /etc/kolla-salt)")
    through = parser.add_mutually_exclusive_group()
    through.add_argument("--master", metavar="DIR",
                         help="act on every host through the salt-master whose config folder is DIR "
                              f"({', '.join(THROUGH_MASTER)}; logs and rollback take HOST:CONTAINER); "
                              "the operator folder is its kolla_config_dir")
    through.add_argument("--lab", metavar="NAME", help="the same through the master of the lab NAME (`kolla-salt lab`)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_release_jump(p):
        p.add_argument("--allow-release-jump", action="store_true",
                       help="allow a release change outside OpenStack's upgrade paths (N -> N+1, SLURP)")

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = add("build", cmd_build, "build images (parents first; unchanged images are not rebuilt)")
    p.add_argument("images", nargs="*", help="image folders under images/ (default: those the services enabled "
                                             "in globals.yml run, and their parents)")
    p.add_argument("--all", action="store_true", help="every image folder (a guest image too)")
    p.add_argument("--release", help="build this release's images (see `kolla-salt releases`)")
    p.add_argument("--force", action="store_true", help="rebuild even if unchanged")
    p.add_argument("--push", action="store_true", help="then push them to docker_registry (globals.yml), from "
                   "which hosts pull; with --master/--lab, that folder's globals.yml")
    p = add("deploy", cmd_deploy, "deploy or reconfigure the services of this host (salt-call --local)")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--test", action="store_true", help="show what would change; change nothing")
    add_release_jump(p)
    p = add("reconfigure", cmd_deploy, "same as deploy: re-render config, restart what changed")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--test", action="store_true", help="show what would change; change nothing")
    add_release_jump(p)
    p = add("upgrade", cmd_upgrade, "upgrade in container-set tree order; a failed container "
                                    "is rolled back to its previous generation and the run stops")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--set", help="only the services of this set (top-level set or service name)")
    p.add_argument("--release", help="the release to upgrade to (globals.yml; with --services or --set, "
                                     "pins.yml for those services)")
    p.add_argument("--batch", type=int, default=1, help="through a master: hosts upgraded at a time (default 1)")
    add_release_jump(p)
    add("validate", cmd_validate, "check globals.yml, passwords.yml and config overrides")
    p = add("certificates", cmd_certificates, "make a private CA and the certificate of each endpoint TLS is on "
            "for (certificates/haproxy.pem, haproxy-internal.pem, backend-cert.pem and backend-key.pem, and "
            "ca/root.crt in the operator folder, mode 0600; a valid one is kept)")
    p.add_argument("--days", type=int, default=365, help="how long the certificates are valid (default 365)")
    p.add_argument("--renew", action="store_true", help="make new certificates even if the current ones are valid")
    add("genpwd", cmd_genpwd, "fill missing passwords in passwords.yml and make missing key repositories "
                              "(keys/; keeps existing ones)")
    add("rotate-keys", cmd_rotate_keys, "rotate keystone's fernet keys (keys/keystone/fernet) once every host "
                                        "holds the current ones, then deploy them to every keystone host")
    p = add("releases", cmd_releases, "list the OpenStack releases whose whole cloud kolla-salt's tests prove, "
                                      "oldest first")
    p.add_argument("--all", action="store_true", help="every release kolla-salt can build, and what is proven of it")
    add("settings", cmd_settings, "list every setting of globals.yml with its default, the file that "
                                  "declares it and the operator's value")
    p = add("status", cmd_status, "show the container-set tree with state, health, image, generation")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p = add("logs", cmd_logs, "show a container's logs (service log files: <kolla_log_directory>/<service>/)")
    p.add_argument("container", help="container name, with or without container_name_prefix; through a master "
                                     "HOST:CONTAINER")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (on the container's host)")
    p.add_argument("--tail", type=int, help="only the last N lines")
    p = add("history", cmd_history, "list a container's generations: outcome, time, image, config hash")
    p.add_argument("container", help="container name, with or without container_name_prefix")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p = add("rollback", cmd_rollback, "return a container or a set to its last known good generation")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("container", nargs="?", help="container name, with or without container_name_prefix")
    group.add_argument("--set", help="a set name or path (containers roll back in reverse order)")
    group.add_argument("--release", help="after an upgrade from RELEASE: the database as the backup the upgrade "
                                         "took holds it, and every container at RELEASE (asks first)")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="with --release: do not ask")
    p = add("unpin", cmd_unpin, "remove pins (pins.yml) so services and containers follow globals.yml "
                                "again at the next deploy")
    p.add_argument("names", nargs="+", metavar="NAME", help="a service (its release pin and its containers held "
                                                            "on any host) or a container (with or without the prefix; "
                                                            "HOST:CONTAINER for one held through a master)")
    p = add("stop", cmd_stop, "stop running containers (default: all managed ones; through a master, on every "
                              "host); `deploy` starts them again")
    p.add_argument("--services", help="comma-separated services")
    p = add("destroy", cmd_destroy, "remove all managed containers, through a master on every host (asks "
                                    "first; keeps volumes)")
    p.add_argument("--remove-volumes", action="store_true", help="also remove named volumes and their data")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="do not ask")
    p = add("init-runonce", cmd_init_runonce, "make the deployed cloud ready for its first server: the project's "
            "guest image, a flavor, a network with a subnet and a router, a keypair (what exists is kept)")
    p.add_argument("--prefix", default="demo-", help="the start of every name it gives (default demo-)")
    p.add_argument("--cidr", default="10.0.0.0/24", help="the subnet's range (default 10.0.0.0/24)")
    p.add_argument("--public-key", metavar="FILE", help="the keypair's public key (default: a new keypair, "
                                                       "its private key in the operator folder as PREFIXkey.pem)")
    p = add("compute", cmd_compute, "drain: disable a compute host in nova and live-migrate its servers to the "
            "others (refused, naming them, when they do not fit there); undrain: let nova schedule there again")
    p.add_argument("action", choices=("drain", "undrain"))
    p.add_argument("host", metavar="HOST", help="the compute host (its nova-compute's host name: the minion id)")
    p.add_argument("--timeout", type=float, default=600, help="drain: seconds to wait for the servers to move "
                                                              "(default 600)")
    p = add("mariadb-backup", cmd_mariadb_backup, "back up the database with mariabackup while it serves "
            "(kept in mariadb_backup_directory with a manifest and the secrets its data needs; through a master: "
            "of the last Synced Galera member, desynced meanwhile)")
    p.add_argument("--list", action="store_true", help="list the backups kept, oldest first")
    p.add_argument("--incremental", action="store_true", help="only what changed since the newest full backup "
                   "(a restore applies both)")
    p = add("mariadb-restore", cmd_mariadb_restore, "put the database back as a backup holds it (asks first; "
            "a backup of the data it replaces is taken first; through a master: the Galera cluster is founded "
            "again from the member holding it)")
    p.add_argument("backup", metavar="BACKUP", help="the backup's name (`kolla-salt mariadb-backup --list`)")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="do not ask")
    add("mariadb-recovery", cmd_mariadb_recovery, "after every Galera member stopped: bootstrap from the member "
        "with the highest committed position and rejoin the others one at a time (through a master)")
    p = add("lab", cmd_lab, "a lab of hosts on one machine: network namespaces with their own Docker "
                            "engines and salt-minions, a salt-master and a registry (a test bed)")
    p.add_argument("action", choices=("up", "down", "status"),
                   help="up: make or repair it; down: remove all it made; status: which minions answer "
                        "(images reach its registry with `kolla-salt --lab NAME build --push`)")
    p.add_argument("--hosts", type=int, default=3, help="how many hosts (lab/topology.yml lists them; default 3)")
    p.add_argument("--name", default="kslab", help="the lab's name, the prefix of all it makes (default kslab)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return parser


THROUGH_MASTER = ("build", "deploy", "reconfigure", "upgrade", "status", "logs", "rollback", "unpin", "stop",
                  "destroy", "mariadb-recovery", "mariadb-backup", "mariadb-restore", "rotate-keys", "certificates")


def _through_master(args):
    """--master DIR / --lab NAME: args.master is the Master (else None) and the operator
    folder is the master's."""
    from .lab import Lab
    from .master import Master
    chosen = args.master or args.lab
    if chosen and args.command not in THROUGH_MASTER:
        raise ValidationError([f"{'--master' if args.master else '--lab'}: `{args.command}` runs on a host "
                               f"itself (through a master: {', '.join(THROUGH_MASTER)})"])
    args.master = (Master(args.master) if args.master else Lab(args.lab).master() if args.lab else None)
    if args.master:
        args.config_dir = str(args.master.operator_folder())


class _QuietWhenClosed:
    """stdout that goes quiet when its reader leaves (`kolla-salt status | head`): the
    command finishes its work (a deploy half-done because of a pipe helps nobody) and
    exits without a BrokenPipeError traceback."""

    def __init__(self, stream):
        self.stream = stream

    def _guard(self, action, *args):
        try:
            return action(*args)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            return None

    def write(self, text):
        self._guard(self.stream.write, text)
        return len(text)

    def flush(self):
        self._guard(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main(argv=None):
    sys.stdout = _QuietWhenClosed(sys.stdout)
    args = build_parser().parse_args(argv)
    try:
        _through_master(args)
        return args.func(args) or 0
    except ValidationError as error:
        print("error: invalid input, nothing was changed:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return EXIT_INVALID
    except KollaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
