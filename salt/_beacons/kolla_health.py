"""Beacon: reports managed containers that hang, fail or are only slow.

A thin adapter over kolla_salt.healing.health (the logic and its reasons live there).
Every pass (each second) it collects the checks that are over, looks at the
containers' processes and the host's pressure, starts the checks that are due
(each running managed container's own check, through `docker exec`, in the
background: health.CheckRunner), writes what it knows to `status_file` and
fires, only on change (health.HealthTracker):

    salt/beacon/<minion>/kolla_health/<name>/unhealthy   hung, stalled, or `threshold` failures in a row
    salt/beacon/<minion>/kolla_health/<name>/slow        its check failed slowly under load: not restarted
    salt/beacon/<minion>/kolla_health/<name>/failing     a stateful one fails without a certain hang
    salt/beacon/<minion>/kolla_health/<name>/healthy     a reported container passes again

Configuration (a list of one-key dicts, Salt 3008 style; kolla_salt.healing.healthloop.beacon_config
writes it from the health_* settings)::

    beacons:
      kolla_health:
        - interval: 1          # beacon passes (Salt's loop_interval units: keep it at 1 s)
        - check_interval: 5    # seconds between checks of a passing container
        - retry_interval: 1    # ... while its check fails
        - threshold: 3         # consecutive failures before `unhealthy`
        - probe: 1             # a check running this long while a service process is stopped: hung
        - pressure_limit: 0.2  # host PSI share above which a slow failure is load, not a fault
        - slow_factor: 3       # a slow container's checks get this many times their timeout
        - stall_window: 10     # seconds without CPU progress while failing: stalled
        - prefix: ""           # watch only containers whose name starts with it
        - remind: 10           # repeat a standing `unhealthy` after 10, 20, 40... s
        - remind_max: 600      # ... up to this gap
        - status_file: /var/lib/kolla-salt/health/status.json
        - state_dir: /var/lib/kolla-salt   # watch only the containers whose history is here
"""
try:
    import docker

    from kolla_salt.healing import health
    HAS_LIBS = True
except ImportError:
    HAS_LIBS = False

__virtualname__ = "kolla_health"

# Counters, checks in flight, what was inspected and Docker's event stream survive
# between beacon runs in the module (health.BeaconState, one per loaded beacon).
_STATES = {}
_CLIENT = []


def __virtual__():
    if not HAS_LIBS:
        return False, "kolla_health beacon needs the docker SDK and kolla_salt"
    return __virtualname__


def validate(config):
    return health.validate_beacon_config(config)


def _client():
    if not _CLIENT:
        _CLIENT.append(docker.from_env(timeout=60))
    return _CLIENT[0]


def beacon(config):
    conf = health.merge_config(config)
    key = conf.get("_beacon_name", __virtualname__)
    state = _STATES.setdefault(key, health.BeaconState())
    health.configure(state, conf)
    return health.beacon_pass(_client(), state, prefix=conf.get("prefix", ""), status_file=conf.get("status_file"))
