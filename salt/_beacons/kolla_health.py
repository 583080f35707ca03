"""Beacon: reports managed containers whose health check keeps failing.

A thin adapter over kolla_salt.health (the logic and its reasons live there).
Every `interval` seconds it collects the checks that are over and starts the
next ones (each running managed container's own check, through `docker exec`,
in the background: health.CheckRunner), and fires, only on change:

    salt/beacon/<minion>/kolla_health/<name>/unhealthy   after `threshold` failures in a row
    salt/beacon/<minion>/kolla_health/<name>/healthy     when a reported container recovers

Configuration (a list of one-key dicts, Salt 3008 style)::

    beacons:
      kolla_health:
        - interval: 5        # seconds between checks
        - threshold: 3       # consecutive failures before `unhealthy`
        - prefix: ""         # watch only containers whose name starts with it
        - remind: 10         # repeat a standing `unhealthy` after 10, 20, 40... s
        - remind_max: 600    # ... up to this gap

Salt calls beacons every second but counts `interval` in `loop_interval`
units: keep the minion's loop_interval at 1 (Salt's default).
"""
try:
    import docker

    from kolla_salt import health
    HAS_LIBS = True
except ImportError:
    HAS_LIBS = False

__virtualname__ = "kolla_health"

# Counters and checks in flight survive between beacon runs in the module (one per loaded beacon).
_TRACKERS = {}
_RUNNERS = {}
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
    tracker = _TRACKERS.setdefault(key, health.HealthTracker())
    # A key the configuration leaves out keeps HealthTracker's default.
    tracker.threshold = int(conf.get("threshold", tracker.threshold))
    tracker.remind = float(conf.get("remind", tracker.remind))
    tracker.remind_max = float(conf.get("remind_max", tracker.remind_max))
    runner = _RUNNERS.setdefault(key, health.CheckRunner())
    return health.beacon_pass(_client(), tracker, runner, prefix=conf.get("prefix", ""))
