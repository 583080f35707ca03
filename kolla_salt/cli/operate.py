"""What runs and what ran: status, logs, history, a container's rollback, unpin,
stop and destroy."""
import json
import sys

from ..declaration.tree import in_set
from ..errors import KollaError, NoEarlierGeneration, ValidationError
from ..roads.statereturns import on_host
from .common import _client, _confirmed, _on_every_host, _one_host, _refusal_of, _settings, _split
from .database import _rollback_release
from .declaring import _declare_rollback, _declaring
from .prepare import _with_api_addresses


def cmd_status(args):
    """What runs on each host (kolla_container.status), in the set tree; what pins.yml
    holds; the health loop."""
    from ..healing.status import render, render_hosts
    from ..declaration.pins import load_pins
    settings = _settings(args)
    tls, pins = _certificate_status(args, settings), load_pins(args.config_dir)
    found = args.road.ask_all("kolla_container.status")
    hosts = {host: ret for host, ret in found.items() if isinstance(ret, dict) and "containers" in ret}
    silent = {host: f"its Docker engine does not answer ({ret['engine_error']})" if isinstance(ret, dict)
              else ret or "its salt-minion does not answer the master"
              for host, ret in found.items() if host not in hosts}
    said_pins = {"services": pins.services, "containers": pins.containers}
    if None not in found:   # hosts to name: a master's
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
    from ..operations import certificates
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


def cmd_logs(args):
    """A container's stdout/stderr (docker logs); the service's own log files are
    under <kolla_log_directory>/<service>/ on the host."""
    try:
        host, name = args.road.container(args.container, "logs")
        if args.follow:
            return args.road.follow_logs(host, name, args.tail,
                                         lambda since: _print_logs(args, host, name, since, follow=True))
        _print_logs(args, host, name, since=None)
    except KeyboardInterrupt:   # how a follow ends, unless its container stops first
        pass
    return 0


def _print_logs(args, host, name, since, follow=False):
    """Prints kolla_container.logs of container `name` on `host` (--tail on the first
    call, the lines after `since` on the next ones of a follow); returns its answer."""
    found = _one_host(args, host, "kolla_container.logs", name,
                      *([f"tail={args.tail}"] if args.tail is not None and since is None else []),
                      *([f"since={since}"] if since is not None else []), *(["follow=True"] if follow else []))
    if found is None:
        raise KollaError(f"logs: no container named {name}{f' on {host}' if host else ''}")
    if not isinstance(found, dict):
        raise KollaError(f"logs: {on_host(host)}{_refusal_of(found)}")
    sys.stdout.write(found["logs"])
    sys.stdout.flush()
    return found


def cmd_history(args):
    """What ran before: every generation of a container, oldest first (no spec
    values: they may hold secrets)."""
    import datetime

    from ..containers.generations import History
    settings = _settings(args)
    from ..containers.spec import named
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
    host, name = args.road.container(args.container, "rollback")
    names = [name] if name else _set_containers(args)[::-1]   # a set: reverse order

    def asked(function, name):
        found = _one_host(args, host, function, name)
        if not isinstance(found, dict):
            raise KollaError(f"rollback: {on_host(host)}{_refusal_of(found)}")
        return found
    # Every target is known (or the rollback refused) before anything changes. A set's
    # container with no earlier generation did not change since: it stays as it is.
    targets = {}
    for name in names:
        found = asked("kolla_container.rollback_target", name)
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
                done = asked("kolla_container.rollback", name)
                return done["returned_to"], done["generation"]
            _declare_rollback(args, f"{host}:{name}" if host else name, found["generation"], rollback, found["pin"])
    finally:
        args.road.settle("rollback")
    print("[rollback] pins.yml keeps this at the next deploy; `kolla-salt unpin NAME` lets it follow "
          "globals.yml again")
    return 0


def cmd_unpin(args):
    """Removes pins (pins.yml): a service follows openstack_release again, a container
    (on any host: HOST:CONTAINER) its declared spec; the next deploy converges to
    globals.yml. pins.yml alone says what is pinned: no host is asked."""
    from ..declaration.tree import service_order
    prefix = _settings(args)["container_name_prefix"]
    services = {service for _, service in service_order()}
    with _declaring(args) as (_, pins):
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
    from ..containers.spec import LABEL_SET
    if ":" in container_name:   # HOST:CONTAINER: held on another host
        return None
    try:
        return _client().containers.get(container_name).labels.get(LABEL_SET, "").rsplit("/", 1)[-1]
    except docker.errors.DockerException:   # not here, or no engine here (a master's own host)
        return None


def _set_containers(args):
    """Containers of a set (top-level or service) on this host, in tree order."""
    found = args.road.ask_all("kolla_container.status")[None].get("containers", [])
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
            print(f"[stop] {on_host(host)}health loop stopped")
        for name in done["stopped"]:
            print(f"[stop] {on_host(host)}{name} stopped")


def cmd_destroy(args):
    """Removes this deployment's containers (history says so: `rollback` can still
    return to what ran), on this host or, through a master, on every host; volumes
    only when asked. pins.yml is declared state and stays."""
    plans = _on_every_host(args, "destroy_plan")
    if not args.yes_i_really_mean_it:
        for host, plan in plans.items():
            volumes = plan["volumes"]
            print(f"This removes {on_host(host)}{len(plan['containers'] + plan['jobs'])} container(s)"
                  + (f" and {len(volumes)} volume(s) with their data" if args.remove_volumes else
                     f" (volumes with data are kept: {', '.join(volumes) or 'none'})"))
            for name, command in plan["endings"].items():
                print(f"  first, in {name}: {' '.join(command)}")
        if not _confirmed(args):
            return 1
    # (the modules were synced for the plan: no second round)
    for host, done in _on_every_host(args, "destroy", f"remove_volumes={args.remove_volumes}", synced=True).items():
        if done["health_loop_stopped"]:
            print(f"[destroy] {on_host(host)}health loop stopped")
        for name, said in done["ended"].items():
            print(f"[destroy] {on_host(host)}{name}: {said}")
        print(f"[destroy] {on_host(host)}removed {len(done['containers'] + done['jobs'])} container(s)"
              + (f" and {len(done['volumes'])} volume(s)" if args.remove_volumes else ""))
    return 0
