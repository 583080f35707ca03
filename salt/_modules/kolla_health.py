"""Execution module: the health loop's action, called by the reactor.

`kolla_health.restart NAME` restarts a managed container reported unhealthy,
within the cap/backoff of kolla_salt.healing.health.RestartPolicy, and announces:

    kolla/health/<name>/restarted   it was restarted (`docker restart -t <stop_timeout>`)
    kolla/health/<name>/gave-up     the cap was reached; the container is left as it is (still watched)
    kolla/health/<name>/held        a member of its cluster is down: not now

Reactor SLS files get no pillar, so the policy comes from the minion that
runs this module: its options (the all-in-one daemon, kolla_salt.healing.healthloop)
or its pillar (a master's minion; pillar/kolla.sls puts it there). Without
either, it restarts nothing and says why: no guessed policy, no guessed prefix::

    kolla_health:
      state_file: /var/lib/kolla-salt/health/restarts.json
      restart_cap: 3
      restart_window: 600
      restart_backoff: 10
      stop_timeout: 2
      prefix: ""
      state_dir: /var/lib/kolla-salt     # restarts are written to the generation's history
"""
from salt.exceptions import CommandExecutionError

try:
    import docker

    from kolla_salt.healing import health
    HAS_LIBS = True
except ImportError:
    HAS_LIBS = False

__virtualname__ = "kolla_health"


def __virtual__():
    if not HAS_LIBS:
        return False, "kolla_health needs the docker SDK and kolla_salt"
    return __virtualname__


def _conf():
    """The restart policy: the all-in-one daemon has it in its options, a master's
    minion in pillar."""
    conf = __opts__.get("kolla_health") or __pillar__.get("kolla_health")
    if not conf:
        raise CommandExecutionError("kolla_health.restart: no `kolla_health` restart policy in this minion's "
                                    "options or pillar (pillar/kolla.sls gives it when enable_health_loop is true)")
    return conf


def _policy(conf):
    return health.RestartPolicy(cap=conf["restart_cap"], window=conf["restart_window"],
                                backoff=conf["restart_backoff"])


def restart(name, incarnation=None, verdict="failing", healthy_for=0.0):
    """Restarts container NAME unless the policy says wait, hold or give up
    (arguments: the beacon's `unhealthy` event); fires kolla/health/NAME/<action>
    for restarted, gave-up and held. Returns the decision (action: restarted,
    wait, held, gave-up, left-alone, stale, ignored)."""
    conf = _conf()
    result = health.handle_unhealthy(
        docker.from_env(timeout=120), health.RestartLedger(conf["state_file"]),
        _policy(conf), name, incarnation=incarnation, prefix=conf["prefix"], stop_timeout=conf["stop_timeout"],
        verdict=verdict, healthy_for=float(healthy_for or 0), state_dir=conf.get("state_dir"))
    if result["action"] in ("restarted", "gave-up", "held"):
        __salt__["event.send"](f"kolla/health/{name}/{result['action']}", result)
    return result
