"""What every command of the CLI shares: the operator's settings, what it asks of the
hosts by args.road (kolla_salt.roads.road.Road: this one as a master of one, or a
salt-master's minions), how a host is named in a line."""
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


def _one_host(args, host, function, *function_args):
    """FUNCTION's return on `host` (None: this one); fails when a master's host does
    not answer."""
    found = args.road.returns(host, function, *function_args, timeout=600)
    if host not in found:
        raise KollaError(f"{args.command}: host {host} does not answer the master")
    return found[host]


def _host_name(host):
    """A host in a sentence: its name, or `this host` on one host (None, the road's key)."""
    return host or "this host"


def _on_every_host(args, action, *action_args, synced=False):
    """{host: its return} of kolla_container.ACTION on every host, the hosts running
    older Salt modules synced first (unless `synced`); fails naming the hosts that did
    not do it (the others did: each host's part is whole on its own, and the same
    command again completes the rest)."""
    if not synced:
        args.road.sync_modules()
    found = args.road.ask_all(f"kolla_container.{action}", *action_args, timeout=600)
    failed = {host: ret for host, ret in found.items() if not isinstance(ret, (dict, list))}
    if failed:
        raise KollaError(f"{action}: " + "; ".join(
            f"{host}: {str(ret).strip().splitlines()[-1] if ret else 'its salt-minion does not answer the master'}"
            for host, ret in sorted(failed.items())))
    return found


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
