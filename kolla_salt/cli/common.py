"""What every command of the CLI shares: the operator's settings, the road to the hosts
(this one as a master of one, or a salt-master's minions), how a host is named in a line."""
import socket
import sys

from ..errors import KollaError, ValidationError


def _settings(args, warnings=None):
    from ..declaration.settings import load_settings
    return load_settings(args.config_dir, warnings)


def _client():
    import docker
    return docker.from_env(timeout=600)


def _validated_pillar(args):
    """Validates every operator file; prints warnings; raises ValidationError."""
    from ..declaration.inventory import build_pillar
    warnings = []
    pillar = build_pillar(args.config_dir, minion_id=socket.gethostname(), warnings=warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return pillar


def _declared_here(args):
    """This host's services as the declaration names them, without compiling the
    pillar (kolla_salt.declaration.roles.declared_services)."""
    from ..declaration.pins import load_pins
    from ..declaration.roles import declared_services
    return declared_services(_settings(args), load_pins(args.config_dir), socket.gethostname())


def _select(services, names, where="--services"):
    """The entries of `services` (the pillar's, or kolla_salt.declaration.roles.declared_services')
    that `names` name (all when empty); a name none has is refused."""
    from ..declaration.preflight import unknown_services
    unknown = unknown_services([s["name"] for s in services], names, where)
    if unknown:
        raise ValidationError(unknown)
    return [s for s in services if not names or s["name"] in names]


def _split(text):
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _release(name):
    from ..declaration.releases import load_releases
    releases = load_releases()
    if name not in releases:
        raise ValidationError([f"--release: unknown release '{name}' (known: {', '.join(releases)})"])
    return releases[name]


def _check_images(services):
    """Every image `services` run is on this host (kolla_salt.declaration.preflight.missing_images)."""
    from ..declaration.preflight import missing_images
    missing = missing_images(_client(), services)
    if missing:
        raise ValidationError(missing)


def _host_settings(args, interfaces=None):
    """A host's settings with its facts (addresses), as its pillar holds them, without
    compiling the pillar (the deploy's salt-call does): this host's, or the one with
    `interfaces` (a minion's, from its facts)."""
    from ..declaration.hostfacts import host_facts, interface_address, local_interfaces
    warnings = []
    settings = _settings(args, warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return {**settings, **host_facts(settings, interface_address(settings, interfaces or local_interfaces()))}


def _host_and_container(args):
    """HOST:CONTAINER, as `logs` and `rollback` take them through a master."""
    host, _, container = args.container.partition(":")
    if not container or not host:
        raise ValidationError([f"{args.command}: through a master, name the host: HOST:CONTAINER "
                               f"(got '{args.container}')"])
    return host, container


def _road(args):
    """Where a host action goes: through the master to every host, or to this host as
    a master of one (salt-call --local). Either calls the same kolla_container function.
    Made once per command (one host's reads and validates the operator's files)."""
    if args.master:
        return args.master
    if getattr(args, "here", None) is None:
        from ..declaration.settings import load_passwords
        from ..roads.saltcall import Here
        args.here = Here(args.config_dir, _settings(args), load_passwords(args.config_dir).values())
    return args.here


def _one_host(args, host, function, *function_args):
    """FUNCTION's return on `host` (None: this one) through _road; fails when a
    master's host does not answer."""
    found = _road(args).returns(host, function, *function_args, timeout=600)
    if host not in found:
        raise KollaError(f"{args.command}: host {host} does not answer the master")
    return found[host]


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


def _host_facts(args, declared=False):
    """{host: its kolla_container.facts}: through a master after its checks before a
    change (Master.preflight; with `declared`, what each pillar says of itself too), or
    this host's (keyed None)."""
    return args.master.preflight(declared) if args.master else _road(args).host_facts()


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


def _refusal_of(ret):
    """Why a host did not do what it was asked, from its return (a minion says a
    refusal as "ERROR: why"; None: it did not answer)."""
    return str(ret).strip().removeprefix("ERROR: ") if ret else "no answer"
