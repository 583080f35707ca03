"""The health loop's logic: find containers whose service hangs, decide restarts.

Docker restarts a container only when its process exits. A service that hangs
(alive, but its check fails: deadlock, SIGSTOP, a full disk) stays "unhealthy"
forever. The loop has two halves, both here so they are testable without Salt:

* Watching (used by the `kolla_health` beacon): every interval, run each
  running managed container's own check (the `healthcheck.test` of its
  `kolla.spec` label) through `docker exec`, with the spec's timeout, in the
  background (`CheckRunner`: a pass never waits for a check). A
  `HealthTracker` debounces the results: it reports `<name>/unhealthy` only
  after `threshold` consecutive failures and `<name>/healthy` when a
  container it reported comes back, never the same news twice, so the event
  bus carries changes, not a stream of samples (reactor storms are the classic
  failure of beacon+reactor loops). Two exceptions, both bounded: a new
  incarnation of the container (it was restarted) that fails again is news;
  and while a reported container stays unhealthy the report is repeated at
  doubling gaps (`remind`, capped at `remind_max`), so that a restart put off
  by the backoff, or an event the reactor dropped, is retried later.

* Acting (used by the `kolla_health.restart` execution module the reactor
  calls): `RestartPolicy` allows at most `cap` restarts of one container per
  `window` seconds, `backoff` * 2^(k-1) seconds apart after the k-th, and
  past the cap gives up: that incarnation is left as it is (for an operator to
  look at) and the give-up is announced once. The bookkeeping lives in a small
  JSON file under the state folder (`RestartLedger`) because reactions run in
  processes that do not share memory and may run concurrently.
"""
import contextlib
import datetime
import fcntl
import json
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field

import docker.errors

from .spec import LABEL_GENERATION, LABEL_NAME, LABEL_SET, declared_spec

HEALTHY, UNHEALTHY = "healthy", "unhealthy"


# -- finding what to watch --------------------------------------------------------

@dataclass(frozen=True)
class Watched:
    """A running managed container and the check its spec declares."""
    name: str
    container_id: str
    started_at: str          # Docker's State.StartedAt: changes on every (re)start
    test: tuple
    timeout: int
    start_period: int
    generation: str = ""
    set_path: str = ""

    @property
    def incarnation(self):
        return f"{self.container_id[:12]}@{self.started_at}"

    def started_epoch(self):
        return docker_time(self.started_at)


def docker_time(text):
    """Seconds since the epoch of a Docker timestamp (nanosecond precision, 'Z')."""
    if not text or text.startswith("0001-"):
        return 0.0
    text = text.replace("Z", "+00:00")
    head, sep, rest = text.partition(".")
    if sep:  # Python parses at most microseconds
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits):]}"
    return datetime.datetime.fromisoformat(text).timestamp()


def watched_from_container(container, prefix=""):
    """The Watched record of a container, or None when the loop leaves it alone:
    not managed, a kept-aside generation (`<name>.gen<N>`), outside `prefix`
    (another deployment on the same engine), not running, or without a check."""
    labels = container.labels or {}
    name = labels.get(LABEL_NAME)
    if not name or container.name != name or not name.startswith(prefix):
        return None
    state = container.attrs.get("State", {})
    if state.get("Status") != "running" or state.get("Paused") or state.get("Restarting"):
        return None
    check = declared_spec(labels).get("healthcheck")
    if not check or not check.get("test"):
        return None
    return Watched(name=name, container_id=container.id, started_at=state.get("StartedAt", ""),
                   test=tuple(check["test"]), timeout=int(check.get("timeout") or 5),
                   start_period=int(check.get("start_period") or 0),
                   generation=labels.get(LABEL_GENERATION, ""), set_path=labels.get(LABEL_SET, ""))


def managed_names(client, prefix=""):
    """{managed name: state} of the current (not kept-aside) managed containers,
    from one cheap listing."""
    names = {}
    for entry in client.api.containers(all=True, filters={"label": LABEL_NAME}):
        name = (entry.get("Labels") or {}).get(LABEL_NAME, "")
        if name.startswith(prefix) and f"/{name}" in entry.get("Names", []):
            names[name] = entry.get("State", "")
    return names


def watched_containers(client, names):
    """Watched records of the running ones among `names` (see managed_names)."""
    watched = []
    for name, state in names.items():
        if state != "running":
            continue
        try:
            item = watched_from_container(client.containers.get(name))
        except docker.errors.NotFound:
            continue
        if item:
            watched.append(item)
    return watched


# -- running checks -----------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str = ""


# Passes come on Salt's 1 s loop ticks, a few ms late or early: a check whose
# timeout falls due within this much of a pass is over at that pass, not one
# interval later.
PASS_JITTER = 0.5


@dataclass
class _Flight:
    item: Watched
    exec_id: str | None
    thread: threading.Thread | None
    box: dict
    started: float


def worst_detection(interval, threshold, timeout):
    """Seconds from a hang to the `unhealthy` event at worst: the next pass starts
    the first failing check, and each failing check is collected at the first
    pass after its timeout."""
    return interval + threshold * math.ceil(timeout / interval) * interval


class CheckRunner:
    """Runs the checks in the background, across beacon passes: a pass collects
    the checks that ended, or outlived their timeout (ended by force: a
    failure), and starts one for each watched container without a check in
    flight; it never waits for one. A hung service thus costs its check
    timeout once, not once per interval on top of the interval, and checks
    keep the beacon's period: with a timeout under the interval, a hang is
    reported after `threshold` intervals."""

    def __init__(self):
        self.in_flight = {}

    def collect(self, client, now):
        """[(Watched, CheckResult)] of the checks that are over."""
        done = []
        for name, flight in list(self.in_flight.items()):
            if flight.thread is not None and flight.thread.is_alive() and \
                    now - flight.started < flight.item.timeout - PASS_JITTER:
                continue
            del self.in_flight[name]
            result = flight.box["result"] if flight.thread is None else \
                _collect(client, flight.item, flight.exec_id, flight.thread, flight.box)
            done.append((flight.item, result))
        return done

    def start(self, client, watched, now):
        for item in watched:
            if item.name in self.in_flight:
                continue
            try:
                exec_id = client.api.exec_create(item.container_id, list(item.test))["Id"]
            except docker.errors.APIError as error:
                self.in_flight[item.name] = _Flight(item, None, None, {
                    "result": CheckResult(False, f"docker exec failed: {error}")}, now)
                continue
            box = {}
            thread = threading.Thread(target=_exec_into, args=(client, exec_id, box), daemon=True)
            thread.start()
            self.in_flight[item.name] = _Flight(item, exec_id, thread, box, now)

    def forget_others(self, names):
        for name in set(self.in_flight) - set(names):
            del self.in_flight[name]


def _exec_into(client, exec_id, box):
    try:
        box["output"] = client.api.exec_start(exec_id) or b""
    except Exception as error:  # reported as a failed check
        box["error"] = str(error)


def _collect(client, item, exec_id, thread, box):
    if thread.is_alive():
        # The check hangs: end it (its host PID; same PID namespace as the engine)
        # so it does not pile up, and count it as a failure.
        with contextlib.suppress(Exception):
            pid = client.api.exec_inspect(exec_id).get("Pid")
            if pid:
                os.kill(pid, signal.SIGKILL)
        return CheckResult(False, f"check timed out after {item.timeout} s")
    if "error" in box:
        return CheckResult(False, f"docker exec failed: {box['error']}")
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except docker.errors.APIError as error:
        return CheckResult(False, f"docker exec failed: {error}")
    output = box.get("output", b"").decode(errors="replace").strip()[-300:]
    return CheckResult(code == 0, output if code == 0 else f"exit code {code}: {output}")


# -- debouncing -----------------------------------------------------------------------

@dataclass
class _Track:
    incarnation: str
    failures: int = 0
    status: str = ""             # "", HEALTHY or UNHEALTHY: the last news given
    reported: str = ""           # the incarnation whose failure was reported
    next_reminder: float = 0.0
    gap: float = 0.0
    reminders: int = 0


@dataclass
class HealthTracker:
    """Per-container counters between beacon runs; `observe` returns the events
    (tag, data) a result is worth: only changes (see the module docstring)."""
    threshold: int = 3
    remind: float = 60.0          # first repeat of an unhealthy report; 0: never repeat
    remind_max: float = 600.0
    tracks: dict = field(default_factory=dict)

    def observe(self, item, result, now):
        track = self.tracks.get(item.name)
        if track is None:
            track = self.tracks[item.name] = _Track(item.incarnation)
        elif track.incarnation != item.incarnation:   # restarted: count afresh
            track.incarnation, track.failures = item.incarnation, 0
        if result.ok:
            track.failures = 0
            if track.status == UNHEALTHY:
                track.status, track.reported, track.reminders = HEALTHY, "", 0
                return [self._event(item, HEALTHY, track, result)]
            track.status = HEALTHY
            return []
        if item.start_period and now - item.started_epoch() < item.start_period:
            return []                # still starting: failures do not count (as in Docker)
        track.failures += 1
        if track.failures < self.threshold:
            return []
        if track.status != UNHEALTHY or track.reported != item.incarnation:
            track.status, track.reported, track.reminders = UNHEALTHY, item.incarnation, 0
            track.gap = self.remind
            track.next_reminder = now + self.remind
            return [self._event(item, UNHEALTHY, track, result)]
        if self.remind and now >= track.next_reminder:
            track.reminders += 1
            track.gap = min(track.gap * 2, self.remind_max) if self.remind_max else track.gap * 2
            track.next_reminder = now + track.gap
            return [self._event(item, UNHEALTHY, track, result)]
        return []

    def forget_others(self, names):
        """Drops counters of containers that are gone (`names`: those that exist)."""
        for name in set(self.tracks) - set(names):
            del self.tracks[name]

    @staticmethod
    def _event(item, status, track, result):
        return (f"{item.name}/{status}", {
            "name": item.name, "status": status, "container": item.container_id[:12],
            "incarnation": item.incarnation, "generation": item.generation, "set": item.set_path,
            "failures": track.failures, "reminder": track.reminders, "detail": result.detail})


def beacon_pass(client, tracker, runner, prefix=""):
    """One beacon run: collect the checks that are over, start the next ones,
    return the events to fire as Salt beacon dicts ({'tag': suffix, ...data})."""
    names = managed_names(client, prefix)
    events = []
    for item, result in runner.collect(client, time.monotonic()):
        for tag, data in tracker.observe(item, result, time.time()):
            events.append({"tag": tag, **data})
    runner.start(client, watched_containers(client, names), time.monotonic())
    # Counters of a container being restarted are kept (it comes back and its
    # recovery is news); those of removed containers go.
    tracker.forget_others(names)
    runner.forget_others(names)
    return events


BEACON_KEYS = {"threshold": int, "prefix": str, "remind": (int, float), "remind_max": (int, float),
               "interval": (int, float), "enabled": bool}


def validate_beacon_config(config):
    """(ok, message) for the beacon's config, a list of one-key dicts."""
    if not isinstance(config, list) or not all(isinstance(item, dict) for item in config):
        return False, "kolla_health: configuration must be a list of dicts"
    merged = merge_config(config)
    for key, value in merged.items():
        if key.startswith("_"):
            continue
        if key not in BEACON_KEYS:
            return False, f"kolla_health: unknown key {key!r} (known: {', '.join(sorted(BEACON_KEYS))})"
        if not isinstance(value, BEACON_KEYS[key]) or isinstance(value, bool) and BEACON_KEYS[key] is not bool:
            return False, f"kolla_health: {key} has the wrong type ({value!r})"
    if merged.get("threshold", 1) < 1:
        return False, "kolla_health: threshold must be at least 1"
    return True, "valid"


def merge_config(config):
    merged = {}
    for item in config:
        merged.update(item)
    return merged


# -- deciding restarts -------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    action: str          # restart | wait | give-up | left-alone
    retry_in: float = 0.0
    restarts: int = 0    # restarts inside the window before this decision


@dataclass(frozen=True)
class RestartPolicy:
    cap: int = 3
    window: float = 600.0
    backoff: float = 10.0

    def decide(self, record, incarnation, now):
        """What to do about an unhealthy container given its ledger record
        ({'restarts': [epoch...], 'gave_up': incarnation}). Pure: the caller
        records the outcome with `apply`."""
        restarts = [t for t in record.get("restarts", []) if now - t < self.window]
        if record.get("gave_up") == incarnation:
            return Decision("left-alone", restarts=len(restarts))
        if len(restarts) >= self.cap:
            return Decision("give-up", restarts=len(restarts))
        if restarts:
            ready = restarts[-1] + self.backoff * 2 ** (len(restarts) - 1)
            if now < ready:
                return Decision("wait", retry_in=round(ready - now, 1), restarts=len(restarts))
        return Decision("restart", restarts=len(restarts))

    def apply(self, record, decision, incarnation, now):
        """The record after `decision` (old restarts pruned)."""
        restarts = [t for t in record.get("restarts", []) if now - t < self.window]
        gave_up = record.get("gave_up")
        if gave_up and gave_up != incarnation:
            gave_up = None            # restarted by someone else since: a fresh start
        if decision.action == "restart":
            restarts.append(now)
        elif decision.action == "give-up":
            gave_up = incarnation
        return {**record, "restarts": restarts, "gave_up": gave_up}


class RestartLedger:
    """{container name: record} in a JSON file, changed under an exclusive lock.

    Beside it, the file `paused` holds the pid of a deploy, upgrade or rollback
    in progress (see `paused_restarts`): while that process lives, the loop
    restarts nothing, because a container being swapped in may fail its
    check until it is ready and the swap already decides what happens to it.
    And `locks/<name>.lock` is held by the reaction acting on that container
    (see `acting_on`)."""

    def __init__(self, path):
        self.path = str(path)
        self.pause_file = os.path.join(os.path.dirname(self.path), "paused")
        self.lock_dir = os.path.join(os.path.dirname(self.path), "locks")

    def acting_on(self, name):
        """Holds container `name` from looking at it to the end of its restart,
        across processes. A second report of the same failure (a reminder, a
        duplicate) handled meanwhile then finds the new incarnation instead of
        judging the old one with the restart in progress already counted."""
        return _exclusive(os.path.join(self.lock_dir, f"{name}.lock"))

    def paused_by(self):
        """The pid of the live process that paused restarts, or None."""
        try:
            with open(self.pause_file) as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):   # no pause, or its process is gone
            return None
        return pid

    @contextlib.contextmanager
    def paused_restarts(self):
        """No restart while the body runs. A pause already held by a live process (the
        command whose salt-call this is, or an outer pause of this one) is left to it."""
        if self.paused_by() is not None:
            yield
            return
        os.makedirs(os.path.dirname(self.pause_file), exist_ok=True)
        with open(self.pause_file, "w") as f:
            f.write(f"{os.getpid()}\n")
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.pause_file)

    def read(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return {}

    @contextlib.contextmanager
    def update(self):
        with _exclusive(self.path + ".lock"):
            records = self.read()
            yield records
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(records, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)


@contextlib.contextmanager
def _exclusive(lock_path):
    """An exclusive lock on `lock_path` (created with its folder), across processes."""
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def handle_unhealthy(client, ledger, policy, name, incarnation=None, prefix="", stop_timeout=2, now=None):
    """Restarts container `name` if the policy allows; returns what happened as a
    dict with 'action': restarted | wait | gave-up | left-alone | stale | ignored.

    `incarnation` is the one the beacon reported: if the container was
    restarted since (the event is old), nothing is done."""
    now = time.time() if now is None else now
    pauser = ledger.paused_by()
    if pauser:
        return {"name": name, "action": "ignored",
                "reason": f"a deploy, upgrade or rollback (pid {pauser}) is replacing containers"}
    with ledger.acting_on(name):
        try:
            container = client.containers.get(name)
        except docker.errors.NotFound:
            return {"name": name, "action": "ignored", "reason": "no such container"}
        item = watched_from_container(container, prefix)
        if item is None:
            return {"name": name, "action": "ignored",
                    "reason": "not a running, checked container managed by this loop"}
        if incarnation and incarnation != item.incarnation:
            return {"name": name, "action": "stale", "reason": f"restarted since the report ({item.incarnation})"}
        with ledger.update() as records:
            record = records.get(name, {})
            if record.get("container") != container.id:   # redeployed: its past is not this one's
                record = {"container": container.id}
            decision = policy.decide(record, item.incarnation, now)
            records[name] = policy.apply(record, decision, item.incarnation, now)
        result = {"name": name, "container": container.id[:12], "incarnation": item.incarnation,
                  "restarts_in_window": decision.restarts, "cap": policy.cap, "window": policy.window}
        if decision.action == "restart":
            container.restart(timeout=stop_timeout)   # SIGTERM, then SIGKILL: works on a stopped process
            return {**result, "action": "restarted", "restarts_in_window": decision.restarts + 1}
    if decision.action == "wait":
        return {**result, "action": "wait", "retry_in": decision.retry_in}
    if decision.action == "give-up":
        return {**result, "action": "gave-up",
                "reason": f"{decision.restarts} restarts within {policy.window:g} s did not help; left as it is"}
    return {**result, "action": "left-alone"}
