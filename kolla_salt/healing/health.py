"""The health loop's logic: find containers whose service hangs, decide restarts.

Docker restarts a container only when its process exits. A service that hangs
(alive, but its check fails: deadlock, SIGSTOP, a full disk) stays "unhealthy"
forever. The loop has two halves, both here so they are testable without Salt:

* Watching (used by the `kolla_health` beacon, a pass each second): each
  running managed container's own check (the `healthcheck.test` of its
  `kolla.spec` label) runs through `docker exec` in the background
  (`CheckRunner`: a pass never waits for a check), every `interval` seconds,
  every `retry_interval` while it fails. For a passing container a pass of
  Docker's own check of the same command (its HEALTHCHECK, for `docker ps`)
  counts too, so the loop runs its own only between Docker's: each `docker
  exec` costs about 35 ms of CPU before the check even starts. Beside each
  check the pass records what the host shows (kolla_salt.healing.hostsignals: process
  states, CPU time, PSI), and `judge` tells hung from slow from failed (the
  rule: docs/operations.md "Health checks and the health loop",
  docs/design.md). A `HealthTracker` turns verdicts into events, only on
  change: `unhealthy` at once for a certain hang, after `threshold` failures
  in a row otherwise (never for a stateful container: `failing`), `slow` when
  load explains the failures, `healthy` when a reported container passes
  again; so the event bus carries changes, not a stream of samples (reactor
  storms are the classic failure of beacon+reactor loops). Two exceptions,
  both bounded: a new incarnation of the container (it was restarted) that
  fails again is news; and while a reported container stays unhealthy the
  report is repeated at doubling gaps (`remind`, capped at `remind_max`), so
  that a restart put off by the backoff, or an event the reactor dropped, is
  retried later.

* Acting (used by the `kolla_health.restart` execution module the reactor
  calls): `RestartPolicy` allows at most `cap` restarts of one container per
  `window` seconds, `backoff` * 2^(k-1) seconds apart after the k-th, and
  past the cap gives up: that incarnation is left as it is (for an operator
  to look at, still watched) and the give-up is announced once; a container
  that then passes for a whole window starts afresh. `handle_unhealthy`
  holds a cluster member while another member on this engine is down (a
  stateful container is reported unhealthy only on a certain hang: above). The bookkeeping lives in a small JSON file
  under the state folder (`RestartLedger`) because reactions run in processes
  that do not share memory and may run concurrently.
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

from ..containers.engine import current_entries
from ..containers.generations import History
from ..containers.spec import LABEL_GENERATION, LABEL_NAME, LABEL_SET, declared_spec
from ..private import write_private
from .hostsignals import pressure_between, process_table, read_pressure, service_sample

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
    pid: int = 0             # State.Pid: its service processes are this one's descendants
    stateful: bool = False   # the spec's `stateful`: restarted only on a certain hang
    cluster: str = ""        # the spec's `cluster`: never two members on this engine restarted at once
    docker_interval: int = 0     # seconds between Docker's own checks of it (its HEALTHCHECK, the same test)
    docker_passed: float = 0.0   # when Docker's latest check of it started, if that passed (epoch); 0: not

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
    spec = declared_spec(labels)
    check = spec.get("healthcheck")
    if not check or not check.get("test"):
        return None
    timeout = int(check.get("timeout") or 5)
    return Watched(name=name, container_id=container.id, started_at=state.get("StartedAt", ""),
                   test=tuple(check["test"]), timeout=timeout,
                   start_period=int(check.get("start_period") or 0),
                   generation=labels.get(LABEL_GENERATION, ""), set_path=labels.get(LABEL_SET, ""),
                   pid=int(state.get("Pid") or 0), stateful=bool(spec.get("stateful")),
                   cluster=spec.get("cluster") or "", docker_interval=int(check.get("interval") or 0),
                   docker_passed=docker_pass(state, timeout))


def docker_pass(state, timeout):
    """When Docker's latest check of this incarnation (State.Health.Log) started, if it
    passed within `timeout`; 0.0 if it failed, was slow, or ran before the last start."""
    log = (state.get("Health") or {}).get("Log") or []
    if not log or log[-1].get("ExitCode") != 0:
        return 0.0
    began, ended = docker_time(log[-1].get("Start")), docker_time(log[-1].get("End"))
    if began < docker_time(state.get("StartedAt")) or ended - began > timeout:
        return 0.0
    return began


class Watchlist:
    """The Watched records of the running managed containers, kept across passes.

    A pass lists the containers once (one API call) and inspects one again only
    when the listing shows a change (another container id, or its status text:
    a restart, Docker's verdict, the uptime's next minute), its service process is
    gone from /proc (restarted), or a check of it is due and Docker may have
    passed one since (`fresh`). Inspecting each container on every pass was most
    of the loop's cost at rest.

    Only this deployment's containers are watched: those whose history is in
    `state_dir` (another deployment or a test on the same engine may share the
    name prefix, the empty one of a default deployment above all)."""

    def __init__(self, state_dir=None):
        self.state_dir = state_dir
        self.known = {}      # name: (listing id and status, Watched or None)
        self.entries = {}    # the latest listing: {name: entry} (current_entries)

    def update(self, client, entries, table):
        """The Watched records of `entries` ({name: listing entry}, current_entries)
        that run; `table`: hostsignals.process_table of this pass."""
        watched = []
        for name, entry in entries.items():
            if entry.get("State") != "running":
                self.known.pop(name, None)
                continue
            key = (entry.get("Id"), entry.get("Status"))
            seen, item = self.known.get(name, (None, None))
            if seen != key or (item is not None and item.pid not in table):
                item = self._inspect(client, name, key)
            if item is not None:
                watched.append(item)
        for name in set(self.known) - set(entries):
            del self.known[name]
        return watched

    def fresh(self, client, item):
        """`item` inspected now (Docker's latest check of it), or None when it is gone."""
        return self._inspect(client, item.name, self.known.get(item.name, (None, None))[0])

    def _inspect(self, client, name, key):
        try:
            ours = self.state_dir is None or History(self.state_dir, name).file.exists()
            item = watched_from_container(client.containers.get(name)) if ours else None
        except docker.errors.NotFound:
            item = None
        self.known[name] = (key, item)
        return item


class ContainerEvents:
    """What Docker's event stream told since the last pass: whether the managed
    containers may have changed (one was created, started, ended, renamed,
    paused, removed, or Docker's verdict of it changed), and which of them a
    check failed in (a command `docker exec`ed or Docker's HEALTHCHECK ended
    with another exit code than 0). A thread follows the stream; a pass lists
    the containers only after such a change, when the stream broke, or `relist`
    s after the last listing: at rest a listing each second was a third of the
    loop's cost (the engine builds it). A failed check is the cheap signal that
    brings the loop's own check at once, rather than at its next interval."""
    ACTIONS = {"create", "start", "restart", "die", "destroy", "rename", "pause", "unpause", "oom", "health_status"}

    def __init__(self, relist=30.0):
        self.relist = relist
        self.changed = threading.Event()
        self.failed = set()      # names; the thread adds, take_failed empties
        self.thread = None
        self.listed = -math.inf

    def take_failed(self):
        """Names of the containers a check failed in since the last call."""
        failed, self.failed = self.failed, set()
        return failed

    def due(self, client, now):
        """Whether this pass lists the containers (and then counts it as done)."""
        if self.thread is None or not self.thread.is_alive():
            self.changed.set()
            self.thread = threading.Thread(target=self._follow, args=(client,), daemon=True)
            self.thread.start()
        if not self.changed.is_set() and now - self.listed < self.relist:
            return False
        self.changed.clear()   # before the listing: an event during it brings another
        self.listed = now
        return True

    def _follow(self, client):
        try:
            for event in client.events(decode=True, filters={"type": "container", "label": LABEL_NAME}):
                action = event.get("Action", "").split(":")[0]   # "health_status: healthy"
                attributes = (event.get("Actor") or {}).get("Attributes") or {}
                if action in self.ACTIONS:
                    self.changed.set()
                elif action == "exec_die" and attributes.get("exitCode") not in (None, "0"):
                    self.failed.add(attributes.get("name"))
        except Exception:   # the stream ended (the engine restarted, an idle read timed out)
            pass
        self.changed.set()


# -- running checks -----------------------------------------------------------------

@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str = ""
    duration: float = 0.0        # seconds the check ran
    timed_out: bool = False


@dataclass(frozen=True)
class Evidence:
    """What the host showed while a check ran (kolla_salt.healing.hostsignals); the
    defaults say "nothing known", which never makes a hang certain."""
    stopped: bool = False        # a service process was stopped (state T)
    io_wait: bool = False        # one waited on the disk (state D)
    ticks_before: int | None = None   # the service's CPU time when the check started
    ticks: int | None = None          # ... and when it ended
    psi_before: dict = field(default_factory=dict)   # PSI totals then (hostsignals.read_pressure)
    psi: dict = field(default_factory=dict)
    pressure: float | None = None   # the host's pressure during the check (0..1); None: unknown


# Passes come on Salt's 1 s loop ticks, a few ms late or early: a check whose
# timeout falls due within this much of a pass is over at that pass, not one
# interval later.
PASS_JITTER = 0.5
# Docker runs its next check `interval` after the last one ended, and a pass sees
# its result up to a second later.
DOCKER_GRACE = 1.5


@dataclass
class _Flight:
    item: Watched
    exec_id: str | None
    thread: threading.Thread | None
    box: dict
    started: float
    timeout: float
    ticks: int | None = None
    psi: dict = field(default_factory=dict)


class CheckRunner:
    """Runs the checks in the background, across beacon passes (one a second): a
    pass collects the checks that ended, outlived their timeout (ended by
    force: a failure) or run while a service process is stopped (ended after
    `probe` seconds: a stopped process cannot answer), and starts the checks
    that are due; it never waits for one."""

    def __init__(self, probe=1.0):
        self.probe = probe
        self.in_flight = {}
        self.last_start = {}

    def collect(self, client, now, samples=None, psi=None):
        """[(Watched, CheckResult, Evidence)] of the checks that are over.
        `samples`: {name: hostsignals.ServiceSample or None}; `psi`: PSI totals now."""
        samples, psi = samples or {}, psi or {}
        done = []
        for name, flight in list(self.in_flight.items()):
            sample = samples.get(name)
            stopped = bool(sample and sample.stopped)
            age = now - flight.started
            alive = flight.thread is not None and flight.thread.is_alive()
            timed_out = age >= flight.timeout - PASS_JITTER
            if alive and not timed_out and not (stopped and age >= self.probe - PASS_JITTER):
                continue
            del self.in_flight[name]
            if flight.thread is None:
                result = flight.box["result"]
            elif alive:
                _end(client, flight.exec_id)
                result = CheckResult(False, f"check timed out after {flight.timeout:g} s", age, True) if timed_out \
                    else CheckResult(False, f"no answer after {age:.1f} s with a service process stopped", age)
            else:
                result = _collect(client, flight.exec_id, flight.box, flight.box.get("duration", age))
            done.append((flight.item, result, Evidence(
                stopped=stopped, io_wait=bool(sample and sample.io_wait), ticks_before=flight.ticks,
                ticks=sample.ticks if sample else None, psi_before=flight.psi, psi=psi,
                pressure=pressure_between(flight.psi, psi, age))))
        return done

    def start(self, client, due, now, samples=None, psi=None):
        """Starts a check for each (Watched, timeout) in `due` without one in flight."""
        samples = samples or {}
        for item, timeout in due:
            if item.name in self.in_flight:
                continue
            self.last_start[item.name] = now
            sample = samples.get(item.name)
            try:
                exec_id = client.api.exec_create(item.container_id, list(item.test))["Id"]
            except docker.errors.APIError as error:
                self.in_flight[item.name] = _Flight(item, None, None, {
                    "result": CheckResult(False, f"docker exec failed: {error}")}, now, timeout)
                continue
            box = {}
            thread = threading.Thread(target=_exec_into, args=(client, exec_id, box), daemon=True)
            thread.start()
            self.in_flight[item.name] = _Flight(item, exec_id, thread, box, now, timeout,
                                                sample.ticks if sample else None, psi or {})

    def since_start(self, name, now):
        """Seconds since the last check of `name` started (infinite: never)."""
        return now - self.last_start[name] if name in self.last_start else math.inf

    def forget_others(self, names):
        for name in set(self.in_flight) - set(names):
            del self.in_flight[name]
        for name in set(self.last_start) - set(names):
            del self.last_start[name]


def _exec_into(client, exec_id, box):
    began = time.monotonic()
    try:
        box["output"] = client.api.exec_start(exec_id) or b""
    except Exception as error:  # reported as a failed check
        box["error"] = str(error)
    box["duration"] = time.monotonic() - began


def _end(client, exec_id):
    """Ends a check still running (its host PID: same PID namespace as the engine),
    so checks of a hung service do not pile up."""
    with contextlib.suppress(Exception):
        pid = client.api.exec_inspect(exec_id).get("Pid")
        if pid:
            os.kill(pid, signal.SIGKILL)


def _collect(client, exec_id, box, duration):
    if "error" in box:
        return CheckResult(False, f"docker exec failed: {box['error']}", duration)
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except docker.errors.APIError as error:
        return CheckResult(False, f"docker exec failed: {error}", duration)
    output = box.get("output", b"").decode(errors="replace").strip()[-300:]
    return CheckResult(code == 0, output if code == 0 else f"exit code {code}: {output}", duration)


# -- telling hung from slow ---------------------------------------------------------

def judge(result, evidence, usual, pressure_limit):
    """The verdict on one check (the rule: docs/operations.md "Health checks and the
    health loop", docs/design.md):

    ok      it passed
    hung    it failed, or ran past the probe time, while a service process was
            stopped: the service cannot answer until someone sends SIGCONT
    slow    it failed while the host was under pressure (PSI over
            `pressure_limit` of the check's time) and either the service made
            progress (CPU time grew) or the check was slow (timed out, or took
            over twice its usual time); or it was slow while the service waited
            on the disk (state D): load explains it
    failed  anything else; counts towards the threshold

    A slow check under pressure is slow even without progress: a starved
    service may not get one clock tick (10 ms) in a check's time, and a check
    that waits for the CPU has not reached the service yet. A service that
    makes no progress at all is judged over its whole failing streak instead
    (HealthTracker: stalled)."""
    if result.ok:
        return "ok"
    if evidence.stopped:
        return "hung"
    took_long = result.timed_out or result.duration >= max(2 * usual, 1.0)
    loaded = evidence.pressure is not None and evidence.pressure >= pressure_limit
    if loaded and (took_long or _progressed(evidence)) or took_long and evidence.io_wait:
        return "slow"
    return "failed"


def _progressed(evidence):
    """Whether the service's CPU time grew while the check ran (False: unknown)."""
    return None not in (evidence.ticks, evidence.ticks_before) and evidence.ticks > evidence.ticks_before


# Statuses a tracker reports (status file, events).
SLOW, FAILING, HUNG = "slow", "failing", "hung"


@dataclass
class _Track:
    incarnation: str
    failures: int = 0
    status: str = ""             # the last news given: HEALTHY, UNHEALTHY, SLOW, FAILING
    reported: str = ""           # the incarnation whose failure was reported
    next_reminder: float = 0.0
    gap: float = 0.0
    reminders: int = 0
    usual: float = 0.0           # usual duration of a passing check (moving average)
    slow: bool = False           # the last check was slow: the next ones get a longer timeout
    slows: int = 0               # slow checks since it last passed
    slow_checks: int = 0         # slow checks since the loop started (status: how often load was the reason)
    streak: tuple | None = None  # (time, ticks, psi) when the first failing check of a streak started
    streak_answered: bool = False   # a failing check of the streak answered (did not time out)
    healthy_since: float = 0.0   # when it last began to pass
    detail: str = ""
    since: float = 0.0


@dataclass
class HealthTracker:
    """Per-container state between beacon passes; `observe` returns the events
    (tag, data) a check is worth: only changes (see the module docstring).

    unhealthy  restart it: `verdict` hung (a process stopped) or stalled (no CPU
               progress over `stall_window` s of failing checks on a host not
               under pressure): `certain`; or failing (`threshold` failures in a
               row; not sent for a stateful container, which gets `failing`)
    slow       its check failed `threshold` times in a row, slowly under load:
               not counted as failures, not restarted
    failing    a stateful container keeps failing without a certain hang
    healthy    a container reported by one of the above passes again"""
    threshold: int = 3
    remind: float = 60.0          # first repeat of an unhealthy report; 0: never repeat
    remind_max: float = 600.0
    interval: float = 5.0         # between checks of a passing container
    retry_interval: float = 1.0   # between checks while one fails
    pressure_limit: float = 0.2
    slow_factor: float = 3.0
    stall_window: float = 10.0
    tracks: dict = field(default_factory=dict)

    def due(self, item, since_last, stopped=False, since_docker_pass=math.inf, check_failed=False):
        """Whether `item`'s next check is due `since_last` s after the last one
        started: sooner while it fails, has not passed since it (re)started, a
        service process is stopped (a hang shows first there), or another check
        in it just failed (`check_failed`: Docker's); a slow one keeps the normal
        pace (checks add load). For a healthy one a pass of
        Docker's own check `since_docker_pass` s ago counts as a check, and one
        Docker is about to run is waited for (up to DOCKER_GRACE s late); a check
        that fails or hangs there leaves no new pass, and the loop checks by
        itself. Only the loop's own checks tell a reported one's recovery."""
        track = self.tracks.get(item.name)
        if track is None or track.incarnation != item.incarnation:
            unsure = True
        else:
            unsure = not track.slow and (track.failures or not track.healthy_since)
        if unsure or stopped or check_failed and not track.slow:
            return since_last >= self.retry_interval - PASS_JITTER
        if track.slow or track.status != HEALTHY:
            return since_last >= self.interval - PASS_JITTER
        dockers_next = item.docker_interval - PASS_JITTER <= since_docker_pass < item.docker_interval + DOCKER_GRACE
        return min(since_last, since_docker_pass) >= self.interval - PASS_JITTER and not dockers_next

    def timeout(self, item):
        """The check timeout: a slow container's is `slow_factor` times longer."""
        track = self.tracks.get(item.name)
        return item.timeout * (self.slow_factor if track and track.slow else 1)

    def observe(self, item, result, now, evidence=None):
        evidence = evidence or Evidence()
        track = self.tracks.get(item.name)
        if track is None:
            track = self.tracks[item.name] = _Track(item.incarnation, since=now)
        elif track.incarnation != item.incarnation:   # restarted: count afresh
            track.incarnation, track.failures, track.streak, track.healthy_since = item.incarnation, 0, None, 0.0
        verdict = judge(result, evidence, track.usual, self.pressure_limit)
        track.detail = result.detail
        if verdict == "ok" and track.slow and result.duration > item.timeout:
            verdict = "slow"         # passes only with the longer timeout: still slow, and it counts
        if verdict == "ok":
            if not result.timed_out and result.duration > 0:
                track.usual = result.duration if not track.usual else 0.8 * track.usual + 0.2 * result.duration
            track.failures, track.streak, track.slow, track.slows = 0, None, False, 0
            track.healthy_since = track.healthy_since or now
            if track.status in (UNHEALTHY, SLOW, FAILING):
                self._set(track, HEALTHY, now)
                track.reported, track.reminders = "", 0
                return [self._event(item, HEALTHY, track, result)]
            self._set(track, HEALTHY, now)
            return []
        if track.streak is None:
            track.streak = (now - result.duration, evidence.ticks_before, evidence.psi_before)
            track.streak_answered = False
        if verdict == "hung":
            return self._unhealthy(item, track, result, now, HUNG)
        up_for = now - item.started_epoch()
        if item.start_period and up_for < item.start_period:
            return []                # still starting: failures do not count (as in Docker)
        if not track.healthy_since and _progressed(evidence) and up_for < self.slow_factor * max(item.start_period, 5):
            return []                # never passed yet and busy starting (a loaded host starts slowly)
        if verdict == "slow":
            track.slow = True        # the next checks get the longer timeout at once
            track.slows += 1
            track.slow_checks += 1
            if track.status != SLOW and track.slows >= self.threshold:   # news once it lasts
                self._set(track, SLOW, now)
                return [self._event(item, SLOW, track, result)]
            return []
        track.slow = False
        track.failures += 1
        track.streak_answered = track.streak_answered or not result.timed_out
        if self._stalled(track, evidence, now):
            return self._unhealthy(item, track, result, now, "stalled")
        if track.failures < self.threshold:
            return []
        if item.stateful:            # restarted only on a certain hang
            if track.status != FAILING:
                self._set(track, FAILING, now)
                return [self._event(item, FAILING, track, result)]
            return []
        return self._unhealthy(item, track, result, now, FAILING)

    def _stalled(self, track, evidence, now):
        """No CPU progress at all since the failing streak began, for `stall_window`
        seconds, every check of it timed out, on a host known not to be under
        pressure: a deadlock, not load. (A check that fails fast never reached an
        idle service, which spends no CPU time either: a broken check, say.)"""
        began, ticks, psi = track.streak
        span = now - began
        pressure = pressure_between(psi, evidence.psi, span)
        return (ticks is not None and evidence.ticks == ticks and span >= self.stall_window
                and not track.streak_answered and not evidence.io_wait
                and pressure is not None and pressure < self.pressure_limit)

    def _unhealthy(self, item, track, result, now, verdict):
        if track.status != UNHEALTHY or track.reported != item.incarnation:
            self._set(track, UNHEALTHY, now)
            track.reported, track.reminders = item.incarnation, 0
            track.gap = self.remind
            track.next_reminder = now + self.remind
            return [self._event(item, UNHEALTHY, track, result, verdict)]
        if self.remind and now >= track.next_reminder:
            track.reminders += 1
            track.gap = min(track.gap * 2, self.remind_max) if self.remind_max else track.gap * 2
            track.next_reminder = now + track.gap
            return [self._event(item, UNHEALTHY, track, result, verdict)]
        return []

    @staticmethod
    def _set(track, status, now):
        if track.status != status:
            track.status, track.since = status, now

    def forget_others(self, names):
        """Drops counters of containers that are gone (`names`: those that exist)."""
        for name in set(self.tracks) - set(names):
            del self.tracks[name]

    def snapshot(self):
        """{name: {status, since, detail}}: what `kolla-salt status` shows."""
        return {name: {"status": t.status or "starting", "since": round(t.since, 1), "detail": t.detail,
                       "failures": t.failures, "slow_checks": t.slow_checks, "incarnation": t.incarnation}
                for name, t in sorted(self.tracks.items())}

    @staticmethod
    def _event(item, status, track, result, verdict=""):
        began = track.streak[0] if track.streak else 0.0
        data = {"name": item.name, "status": status, "container": item.container_id[:12],
                "incarnation": item.incarnation, "generation": item.generation, "set": item.set_path,
                "failures": track.failures, "reminder": track.reminders, "detail": result.detail,
                # How long it had passed before this failure: a long healthy run resets the restart cap.
                "healthy_for": round(max(0.0, began - track.healthy_since), 1) if track.healthy_since else 0.0}
        if status == UNHEALTHY:
            data.update(verdict=verdict, certain=verdict in (HUNG, "stalled"))
            track.healthy_since = 0.0
        return (f"{item.name}/{status}", data)


@dataclass
class BeaconState:
    """What one loaded beacon keeps from pass to pass."""
    tracker: HealthTracker = field(default_factory=HealthTracker)
    runner: CheckRunner = field(default_factory=CheckRunner)
    watchlist: Watchlist = field(default_factory=Watchlist)
    events: ContainerEvents = field(default_factory=ContainerEvents)


def beacon_pass(client, state, prefix="", status_file=None, proc="/proc"):
    """One beacon run: collect the checks that are over, start those that are
    due, return the events to fire as Salt beacon dicts ({'tag': suffix, ...data});
    write what it knows of every container to `status_file` when that changed."""
    tracker, runner, watchlist = state.tracker, state.runner, state.watchlist
    if state.events.due(client, time.monotonic()):
        watchlist.entries = dict(current_entries(client, prefix))
    entries = watchlist.entries
    table, psi = process_table(proc), read_pressure(proc)
    watched = watchlist.update(client, entries, table)
    samples = {item.name: service_sample(table, item.pid) for item in watched}
    now = time.monotonic()
    events = []
    for item, result, evidence in runner.collect(client, now, samples, psi):
        for tag, data in tracker.observe(item, result, time.time(), evidence):
            events.append({"tag": tag, **data})
    stopped = {name for name, sample in samples.items() if sample and sample.stopped}
    failed = state.events.take_failed()

    def due(item):
        since_docker = time.time() - item.docker_passed if item.docker_passed else math.inf
        return tracker.due(item, runner.since_start(item.name, now), item.name in stopped, since_docker,
                           item.name in failed)

    # A check looks due by what the watchlist knew; Docker may have passed one since.
    due_now = [fresh for fresh in (watchlist.fresh(client, item) for item in watched
                                   if item.name not in runner.in_flight and due(item))
               if fresh is not None and due(fresh)]
    runner.start(client, [(item, tracker.timeout(item)) for item in due_now], now, samples, psi)
    # Counters of a container being restarted are kept (it comes back and its
    # recovery is news); those of removed containers go.
    tracker.forget_others(entries)
    runner.forget_others(entries)
    if status_file:
        write_json(status_file, tracker.snapshot(), only_if_changed=True)
    return events


def write_json(path, data, only_if_changed=False):
    """Writes `data` to `path` whole and 0600 (kolla_salt.private; one writer at a
    time: the beacon, or the ledger's lock holder)."""
    text = json.dumps(data, indent=1, sort_keys=True)
    if only_if_changed and read_text(path) == text:
        return
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    write_private(path, text)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_json(path):
    """What a JSON file of the loop holds ({} when none or unreadable): the beacon's
    status file, the restart ledger."""
    try:
        return json.loads(read_text(path) or "{}")
    except ValueError:
        return {}


# The beacon's keys: (type, at least). `interval` is Salt's (beacon passes, in
# loop_interval units); the check pace is check_interval/retry_interval.
BEACON_KEYS = {"interval": ((int, float), 0), "enabled": (bool, None), "prefix": (str, None),
               "status_file": (str, None), "state_dir": (str, None), "threshold": (int, 1), "remind": ((int, float), 0),
               "remind_max": ((int, float), 0), "check_interval": ((int, float), 0),
               "retry_interval": ((int, float), 0), "probe": ((int, float), 0),
               "pressure_limit": ((int, float), 0), "slow_factor": ((int, float), 1),
               "stall_window": ((int, float), 0)}


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
        kind, least = BEACON_KEYS[key]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            return False, f"kolla_health: {key} has the wrong type ({value!r})"
        if least is not None and value < least:
            return False, f"kolla_health: {key} must be at least {least}"
    return True, "valid"


def configure(state, conf):
    """Applies a merged beacon config to a BeaconState; a key it leaves out keeps the default."""
    tracker, runner = state.tracker, state.runner
    state.watchlist.state_dir = conf.get("state_dir")
    for key, attr in (("threshold", "threshold"), ("remind", "remind"), ("remind_max", "remind_max"),
                      ("check_interval", "interval"), ("retry_interval", "retry_interval"),
                      ("pressure_limit", "pressure_limit"), ("slow_factor", "slow_factor"),
                      ("stall_window", "stall_window")):
        if key in conf:
            setattr(tracker, attr, type(getattr(tracker, attr))(conf[key]))
    runner.probe = float(conf.get("probe", runner.probe))


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

    def decide(self, record, incarnation, now, healthy_for=0.0):
        """What to do about an unhealthy container given its ledger record
        ({'restarts': [epoch...], 'gave_up': incarnation}) and how long it had
        passed its check before this failure. Pure: the caller records the
        outcome with `apply`."""
        record = self.current(record, healthy_for)
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

    def current(self, record, healthy_for):
        """The record that still counts: a container that passed its check for a
        whole window since its last trouble is no longer given up on (its restarts
        are older than the window then, so they no longer count anyway)."""
        if healthy_for >= self.window and record.get("gave_up"):
            return {**record, "gave_up": None}
        return record

    def apply(self, record, decision, incarnation, now, healthy_for=0.0):
        """The record after `decision` (old restarts pruned)."""
        record = self.current(record, healthy_for)
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

    Beside it, the folder `pauses` holds a file per deploy, upgrade or rollback in
    progress, named by its pid (see `paused_restarts`): while one of those processes
    lives, the loop restarts nothing, because a container being swapped in may fail
    its check until it is ready and the swap already decides what happens to it.
    And `locks/<name>.lock` is held by the reaction acting on that container
    (see `acting_on`)."""

    def __init__(self, path):
        self.path = str(path)
        self.pause_dir = os.path.join(os.path.dirname(self.path), "pauses")
        self.lock_dir = os.path.join(os.path.dirname(self.path), "locks")

    def acting_on(self, name):
        """Holds container `name` from looking at it to the end of its restart,
        across processes. A second report of the same failure (a reminder, a
        duplicate) handled meanwhile then finds the new incarnation instead of
        judging the old one with the restart in progress already counted."""
        return _exclusive(os.path.join(self.lock_dir, f"{name}.lock"))

    def paused_by(self):
        """The pid of a live process that paused restarts, or None. The file of one
        that ended without removing it (killed) is removed."""
        try:
            pids = os.listdir(self.pause_dir)
        except FileNotFoundError:
            return None
        for name in sorted(pids):
            try:
                os.kill(int(name), 0)
                return int(name)
            except (OSError, ValueError):   # its process is gone
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.pause_dir, name))
        return None

    @contextlib.contextmanager
    def paused_restarts(self):
        """No restart while the body runs. Each process holds a pause of its own: the
        states of one deploy swap containers side by side, each in a process of its
        own (salt/states/kolla/service.jinja), and the first to end must not lift the
        pause of the others. Nested in a pause this process holds, it leaves it be."""
        mine = os.path.join(self.pause_dir, str(os.getpid()))
        if os.path.exists(mine):
            yield
            return
        os.makedirs(self.pause_dir, exist_ok=True)
        with open(mine, "w"):
            pass
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(mine)

    def read(self):
        return read_json(self.path)

    @contextlib.contextmanager
    def update(self):
        with _exclusive(self.path + ".lock"):
            records = self.read()
            yield records
            write_json(self.path, records)


@contextlib.contextmanager
def _exclusive(lock_path):
    """An exclusive lock on `lock_path` (created with its folder), across processes."""
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def handle_unhealthy(client, ledger, policy, name, incarnation=None, prefix="", stop_timeout=2, now=None,
                     verdict="failing", healthy_for=0.0, state_dir=None):
    """Restarts container `name` if the policy allows; returns what happened as a
    dict with 'action': restarted | wait | held | gave-up | left-alone | stale | ignored.

    `incarnation` is the one the beacon reported: if the container was
    restarted since (the event is old), nothing is done. `verdict` and
    `healthy_for` are the beacon's (HealthTracker, which reports a stateful
    container unhealthy only on a certain hang): a member of a cluster is not
    restarted while another member is down (`held`), and a process that is
    stopped (`hung`) is killed at once: it could not act on SIGTERM. A
    restart is written to the generation's history under `state_dir`."""
    now = time.time() if now is None else now
    with ledger.acting_on(name):
        pauser = ledger.paused_by()   # looked at under the lock: a swap may have begun while we waited
        if pauser:
            return {"name": name, "action": "ignored",
                    "reason": f"a deploy, upgrade or rollback (pid {pauser}) is replacing containers"}
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
        result = {"name": name, "container": container.id[:12], "incarnation": item.incarnation,
                  "verdict": verdict, "cap": policy.cap, "window": policy.window}
        # One member of a cluster at a time: the lock orders the reactions, the
        # check sees a member still down or starting after its own restart.
        with ledger.acting_on(f"cluster.{item.cluster}") if item.cluster else contextlib.nullcontext():
            down = item.cluster and cluster_members_down(client, item, prefix)
            if down:
                return {**result, "action": "held",
                        "reason": f"cluster {item.cluster}: {', '.join(down)} down or starting"}
            with ledger.update() as records:
                record = records.get(name, {})
                if record.get("container") != container.id:   # redeployed: its past is not this one's
                    record = {"container": container.id}
                decision = policy.decide(record, item.incarnation, now, healthy_for)
                records[name] = policy.apply(record, decision, item.incarnation, now, healthy_for)
            result["restarts_in_window"] = decision.restarts
            if decision.action == "restart":
                # SIGTERM, then SIGKILL after the stop timeout: works on a stopped process
                container.restart(timeout=0 if verdict == HUNG else stop_timeout)
                if state_dir and item.generation:
                    History(state_dir, name).add_restart(int(item.generation), now, verdict)
                return {**result, "action": "restarted", "restarts_in_window": decision.restarts + 1}
    if decision.action == "wait":
        return {**result, "action": "wait", "retry_in": decision.retry_in}
    if decision.action == "give-up":
        return {**result, "action": "gave-up",
                "reason": f"{decision.restarts} restarts within {policy.window:g} s did not help; "
                          f"left as it is, still watched"}
    return {**result, "action": "left-alone"}


def cluster_members_down(client, item, prefix=""):
    """Names of the other current members of `item`'s cluster on this engine that
    are not running or whose Docker health is not `healthy` (starting after a
    restart, unhealthy)."""
    down = []
    for name, entry in current_entries(client, prefix):
        if name == item.name or declared_spec(entry.get("Labels")).get("cluster") != item.cluster:
            continue
        status = entry.get("Status", "")   # "Up 3 minutes (healthy)"
        if entry.get("State") != "running" or "(healthy)" not in status and "(" in status:
            down.append(name)
    return down
