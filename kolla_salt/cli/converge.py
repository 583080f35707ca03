"""deploy, reconfigure, rotate-keys and upgrade: the hosts converge to the declaration
by the road's converge (_converge): this host through salt-call (saltcall.Here), many
through a master by a walk of the set tree (master.Master)."""

from ..declaration.tree import all_services, in_set
from ..errors import ValidationError
from ..roads.statereturns import on_host, summarise
from .common import _host_settings, _release, _select, _settings, _split
from .declaring import _declaration_files, _declaring, _undeclared


def cmd_deploy(args):
    facts, hosts, names = args.road.deploying(_split(args.services))
    return _converge(args, "deploy", facts, hosts, names, predict=True)


def cmd_rotate_keys(args):
    """Rotates the key repositories that rotate (keystone's fernet keys): the staged key
    becomes the primary one, a new key is staged; then deploys their services, which
    writes the new keys on every host (kolla_salt.operations.keys.rotate; through a
    master the orchestration kolla.rotate_keys). Refused while some host does not hold
    the current keys yet (its deploy did not reach it): the key made primary now must
    have been on every host as the staged one ("distribute before use")."""
    from ..operations import keys
    names = keys.rotating_services({s["name"] for s in all_services(args.road.declared())})
    if not names:
        print("[rotate-keys] no host runs a service with keys that rotate; nothing to do")
        return 0
    args.test, args.allow_release_jump = False, False
    facts, hosts, names = args.road.deploying(names)
    return _converge(args, "rotate_keys", facts, hosts, names, {"kolla_rotate_keys": True})


def _converge(args, command, facts, hosts, names, extra_pillar=None, predict=False):
    """A deploy or an upgrade (`command`) of `names` (all when empty) by the road
    (`hosts`, the declaration, and their `facts`, from its preflight; with `predict`
    the hosts predict first). Each road refuses before anything changes; what every
    step did on every host is said here, then the road settles (Here: the health
    loop; a master: the pillars refreshed) and, after a deploy of the service whose
    settings.yml says `client_files` (keystone), the client files say where it is."""
    from ..declaration.pins import load_pins
    for pin in load_pins(args.config_dir).describe():
        print(f"[{command}] pins.yml: {pin}")
    # Without --services the run also removes containers of disabled services, but not
    # one still in use.
    pillar = {**(extra_pillar or {}), **({"kolla_services": names} if names else {}),
              **({"kolla_allow_release_jump": args.allow_release_jump} if args.allow_release_jump else {})}
    road = args.road
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


def _running_bases(road, declared):
    """{service: the bases its containers' images are built on, on any host}."""
    facts, bases = road.preflight(), {}
    for host, placed in declared.items():
        running = (facts.get(host) or {}).get("bases", {})
        for service in placed["services"]:
            bases.setdefault(service["name"], set()).update(
                running[c["spec"]["name"]] for c in service["containers"] if c["spec"]["name"] in running)
    return bases


def _move_base(base, running, user_globals, pins):
    """upgrade --base: the cloud declared on `base`, every container crossing by its
    usual swap, except a service whose folder says why it cannot (settings.yml
    `base_move`) and that runs on another base (`running`: _running_bases): that one
    is held on the base it runs on (pins.yml), said."""
    from ..declaration.settings import base_move_routes
    from ..images.build import base_version
    user_globals["kolla_base_distro_version"] = base
    for name, route in base_move_routes().items():
        held = sorted({base_version(found) for found in running.get(name, ())} - {base})
        if held and not pins.base_of(name):
            pins.services.setdefault(name, {})["base"] = held[0]
            print(f"[upgrade] {name} stays on {held[0]} (pins.yml services.{name}.base): {route}", flush=True)


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
    if args.base and (args.services or args.set):
        raise ValidationError(["--base: moves the whole cloud; it takes no --services or --set"])
    facts = {}   # through a master the hosts', with what their pillars say of the new declaration (check)
    old = args.road.declared()
    services = _select(all_services(old), _split(args.services))
    if args.set:
        services = [s for s in services if in_set(s["set"], args.set)]
        if not services:
            raise ValidationError([f"--set: no enabled service belongs to a set named '{args.set}'"])
    names = [s["name"] for s in services]
    everything = not (args.services or args.set)
    new, hosts = [], {}

    def check():
        """The new declaration before it is kept (refused: taken back): Road.upgrade_checks."""
        checked_facts, checked_hosts, built_here = args.road.upgrade_checks(old, names, args.allow_release_jump,
                                                                             args.release)
        facts.update(checked_facts)
        hosts.update(checked_hosts)
        new.extend(built_here)
    settings = _settings(args)   # the declaration before this command's
    running_bases = _running_bases(args.road, old) if args.base else {}
    before = _declaration_files(args.config_dir)
    with _declaring(args, check) as (user_globals, pins):
        if args.release and everything:
            user_globals["openstack_release"] = args.release
            pins.forget_releases()
        for service in services:
            if args.release and not everything:
                pins.services.setdefault(service["name"], {})["release"] = args.release
            for container in service["containers"]:   # held here, or on a host through a master
                pins.release_container(container["spec"]["name"])
        if args.base:
            _move_base(args.base, running_bases, user_globals, pins)
        # A service pinned to the release or the base every service follows needs no pin.
        release = user_globals.get("openstack_release", settings["openstack_release"])
        base = user_globals.get("kolla_base_distro_version") or settings["kolla_base_distro_version"]
        pins.drop_followed(release, base)
    args.test = False
    args.road.prepare_images(settings, new)
    try:   # the database is backed up after the checks, before the migrations
        return _converge(args, "upgrade", facts, hosts, names,
                         {"kolla_backup_before_migrations": "kolla-salt upgrade", "kolla_batch": args.batch})
    except ValidationError:   # the first states refused the new declaration before anything changed
        _undeclared(args.config_dir, before)
        raise
