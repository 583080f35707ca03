"""Execution module: managed containers. A thin adapter over kolla_salt.containers.manager;
settings (state folder, health timeout, generations kept) and the secrets to
redact from any output come from the `kolla` pillar. Every action a master may
call on a minion is here: plan/ensure, job_pending/run_job, rollback, undeclared/
remove_undeclared (containers of services no longer declared for this host), stop,
destroy_plan/destroy, and what `kolla-salt` on a master reads: facts, status, logs."""
import sys

import docker
from salt.exceptions import CommandExecutionError

from kolla_salt.containers.manager import ContainerManager
from kolla_salt.containers.spec import ContainerSpec
from kolla_salt.errors import said_as

__virtualname__ = "kolla_container"


def __virtual__():
    return __virtualname__


# kolla-salt's refusals as Salt's: Salt says the message, not a traceback.
_refusal = said_as(CommandExecutionError)

# One Docker client per process: making one asks the engine its version, and a
# state run makes a manager for each of its states (half a no-op deploy's time).
_CLIENT = []


def _client():
    if not _CLIENT:
        _CLIENT.append(docker.from_env(timeout=300))
    return _CLIENT[0]


@_refusal
def _kolla():
    """The `kolla` pillar; an error naming what kept it from compiling (a master's
    or salt-call --local's: the operator's files, validated) when it did not."""
    from kolla_salt.declaration.inventory import compiled
    return compiled(__pillar__)


def _manager():
    kolla = _kolla()

    def progress(message):  # shows up on salt-call's terminal while a long state runs
        print(f"[kolla] {message}", file=sys.stderr, flush=True)

    return ContainerManager.from_settings(kolla["settings"], kolla["passwords"].values(), out=progress,
                                          client=_client(), remote_balancers=_remote_balancers(), host=__opts__["id"])


def _remote_balancers():
    """How a swap here drains and enables its server in the haproxies of the other
    hosts: kolla_balancer, published through the master (its `peer` setting allows
    it); none under salt-call --local. Returns {host: its answer} of the hosts that
    answered (kolla_salt.containers.balancer.Balancers reads them)."""
    if __opts__.get("file_client") == "local":
        return None
    others = f"* and not {__opts__['id']}"
    runtime_directory = _kolla()["settings"]["haproxy_runtime_directory"]

    def remote(action, backend, server, timeout):
        answers = __salt__["publish.publish"](others, f"kolla_balancer.{action}",
                                              [backend, server, timeout, runtime_directory],
                                              tgt_type="compound", timeout=timeout + 10)
        return answers if isinstance(answers, dict) else {}   # (a text when the master timed out)
    return remote


def _spec(spec, where):
    return ContainerSpec.from_dict(dict(spec), where=where)


def plan(spec, pin=None):
    """What `ensure` would do: {name, action, changes, generation, notes}."""
    return vars(_manager().plan(_spec(spec, f"spec of {spec.get('name')}"), pin))


def _paused():
    """The host's health loop restarts nothing while a container is being swapped in
    (a deploy through a master has no command on the host to pause it)."""
    from kolla_salt.healing import healthloop
    return healthloop.ledger(_kolla()["settings"]).paused_restarts()


def ensure(spec, pin=None):
    """Converges one container to its spec, or to generation `pin` of its history
    (atomic swap when it must change)."""
    with _paused():
        return vars(_manager().ensure(_spec(spec, f"spec of {spec.get('name')}"), pin))


def job_pending(spec):
    return _manager().job_pending(_spec(spec, f"job {spec.get('name')}"))


def run_job(spec):
    """Runs a one-shot container to completion; returns its (redacted) output."""
    return _manager().run_job(_spec(spec, f"job {spec.get('name')}"))


def present(names):
    """Which of `names` are current managed containers here, in any state: a service none of
    whose containers exists yet is deployed side by side with others
    (salt/states/kolla/service.jinja). One listing per state run, before it changes
    anything (its states render first)."""
    if "kolla_container.present" not in __context__:
        from kolla_salt.containers.engine import current_entries
        __context__["kolla_container.present"] = {name for name, _ in current_entries(_client())}
    return [name for name in names if name in __context__["kolla_container.present"]]


def _found(manager, name):
    """(name, container) of the container called `name` here, as given or with
    container_name_prefix (kolla_salt.containers.spec.named); (name as given, None) when neither is."""
    from kolla_salt.containers.spec import named
    return named(name, _kolla()["settings"]["container_name_prefix"], manager.get)


@_refusal
def rollback_target(name):
    """The container `rollback` would take back, as found here (`name`, with or
    without container_name_prefix): {"name", "generation": the one it returns to,
    "pin": what its pin records besides (kolla_salt.declaration.pins.pin_facts, from this host's
    pillar)}, or {"name", "none": why} when it has no earlier generation."""
    from kolla_salt.declaration.pins import pin_facts
    from kolla_salt.errors import NoEarlierGeneration
    manager = _manager()
    found = _found(manager, name)[0]
    try:
        return {"name": found, "generation": manager.rollback_target(found)["generation"],
                "pin": pin_facts(_kolla(), found)}
    except NoEarlierGeneration as none:
        return {"name": found, "none": str(none)}


@_refusal
def rollback(name):
    """Returns container `name` to its last known good generation:
    {"returned_to": generation, "generation": the new one}."""
    with _paused():
        target, new = _manager().rollback(name)
    return {"returned_to": target, "generation": new}


def _undeclared(manager, declared_sets):
    return manager.undeclared(declared_sets, _kolla()["settings"]["container_name_prefix"])


def undeclared(declared_sets):
    """Names of this deployment's containers whose set is not declared for this host."""
    return [c.name for c in _undeclared(_manager(), declared_sets)]


def deploy_checks(services=None, allow_release_jump=False):
    """(problems, notes) of a deploy of `services` (names; all declared here when
    empty) on this host: kolla_salt.declaration.preflight, with this host's engine and pillar,
    the pillar's warnings (an expiring certificate) among the notes."""
    from kolla_salt.declaration.preflight import deploy_checks as checks
    kolla = _kolla()
    problems, notes = checks(_client(), kolla["services"], services or [], kolla["settings"]["container_name_prefix"],
                             allow_release_jump)
    return problems, [f"warning: {warning}" for warning in __pillar__.get("kolla_warnings") or []] + notes


def undeclared_in_use(declared_sets):
    """{name: what still uses it} of the undeclared containers in use (their spec's
    in_use: libvirt's servers): a deploy keeps them."""
    return _manager().undeclared_in_use(declared_sets, _kolla()["settings"]["container_name_prefix"])


def remove_undeclared(declared_sets):
    """Removes them (never their volumes), each running one's on_destroy command first
    (as `destroy` does: ContainerManager.retire); returns the names removed."""
    manager = _manager()
    leaving = _undeclared(manager, declared_sets)
    manager.retire(leaving)
    return [container.name for container in leaving]


def _engine_error():
    """"" when this host's Docker engine answers, else why not."""
    import docker
    try:
        docker.from_env(timeout=10).ping()   # (from_env already asks the engine its version)
        return ""
    except Exception as failure:  # any failure to reach it is the answer
        return str(failure) or type(failure).__name__


def facts(declared=False):
    """What a master checks before a change (kolla_salt.roads.master): whether this host's
    Docker engine answers (engine_error: "" when it does), the release each managed
    container runs, its interfaces' IPv4 addresses, the version of the Salt
    modules it runs, the base each managed container's image is built on, a digest of the pillar it holds (kolla_salt.roads.master.held_digest)
    and what its Galera member holds (kolla_galera.held_facts); with `declared`, what
    the pillar compiled now says of itself too (`declaration`), in the same round."""
    import os

    import docker

    from kolla_salt.declaration.releases import running_images
    from kolla_salt.roads.master import held_digest, synced_version
    extmods = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    error = _engine_error()
    running = {} if error else running_images(docker.from_env(timeout=10))
    return {"engine_error": error, "releases": {name: release for name, (release, _) in running.items() if release},
            "bases": {name: base for name, (_, base) in running.items() if base},
            "interfaces": __grains__.get("ip4_interfaces") or {},
            "code": synced_version(lambda kind: os.path.join(extmods, kind)), "pillar": held_digest(dict(__pillar__)),
            "galera": None if error else __salt__["kolla_galera.held_facts"](),
            **({"declared": declaration()} if declared else {})}


def declaration():
    """What the pillar the master compiles for this host now says of itself
    (kolla_salt.roads.master.pillar_summary), or the operator files' problems: asked by a
    master before a change that has no prediction to say it. The pillar is compiled
    by Salt as every state run compiles it, with this host's grains."""
    from kolla_salt.roads.master import pillar_summary
    fresh = __salt__["pillar.items"](unmask=True)   # plain values, as held_digest reads the held one
    if "kolla" not in fresh:
        return {"problems": fresh.get("kolla_problems") or fresh.get("_errors") or ["the kolla pillar is empty"]}
    return {"problems": [], **pillar_summary(fresh)}


@_refusal
def status():
    """This host's managed containers in tree order (kolla_salt.healing.status.collect) and its
    health loop (whether its daemon runs, the restarts and verdicts per container);
    {"engine_error"} when its engine does not answer."""
    from kolla_salt.healing import status as host_status
    settings = _kolla()["settings"]
    error = _engine_error()
    if error:
        return {"engine_error": error}
    return {"containers": host_status.collect(_manager().client, settings),
            "health_loop": host_status.health_loop(settings)}


@_refusal
def logs(name, tail=None, since=None, follow=False):
    """{"logs": a container's stdout/stderr (the last `tail` lines, or those written
    after `since`), passwords redacted; "until": the clock of this host up to which
    they go, the next call's `since` (with `follow`); "running": whether the container
    still runs}. None when no container has that name (with or without
    container_name_prefix). A dict, so that no container's text reads as a refusal.
    `logs --follow` through a master calls it again and again, with `follow` (Salt
    returns once, when a function ends)."""
    import time

    from kolla_salt.private import redact
    manager = _manager()
    container = _found(manager, name)[1]
    if container is None:
        return None
    # A line's time is when the engine read it from the container, and it is in the
    # log a moment later: a follow reads up to a second ago, which leaves none to its
    # next call; a single call reads all there is (a line written just before it too).
    until = time.time() - 1 if follow else None
    text = container.logs(tail=int(tail) if tail is not None else "all", until=until,
                          # since and until both hold their own instant (the engine's)
                          **({"since": float(since) + 1e-6} if since is not None else {}))
    return {"logs": redact(text.decode(errors="replace"), manager.secrets), "until": until,
            "running": container.status == "running"}


@_refusal
def stop(services=None):
    """Stops this host's running containers (all, or those of `services`; all stops its
    health loop's daemon too): {"stopped": their names, "health_loop_stopped"}."""
    from kolla_salt.healing import healthloop
    settings = _kolla()["settings"]
    return {"health_loop_stopped": not services and healthloop.stop_health_daemon(settings),
            "stopped": _manager().stop(settings["container_name_prefix"], services or ())}


@_refusal
def destroy_plan():
    """What destroy() would remove on this host (ContainerManager.destroy_plan)."""
    return _manager().destroy_plan(_kolla()["settings"]["container_name_prefix"])


@_refusal
def destroy(remove_volumes=False):
    """Removes this host's containers and jobs (their volumes only with
    `remove_volumes`), its health loop stopped first; returns what it removed
    (ContainerManager.destroy) and whether a health loop's daemon was stopped."""
    from kolla_salt.healing import healthloop
    settings = _kolla()["settings"]
    stopped = healthloop.stop_health_daemon(settings)
    return {**_manager().destroy(settings["container_name_prefix"], remove_volumes=bool(remove_volumes)),
            "health_loop_stopped": stopped}
