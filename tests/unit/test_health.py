"""The health loop's pure logic: debouncing checks into change events, and the
restart policy (cap per window, doubling backoff, give-up once)."""
import dataclasses
import json
import math
import threading
from types import SimpleNamespace

import docker.errors
import pytest

from kolla_salt.containers.generations import History
from kolla_salt.declaration.settings import default_settings
from kolla_salt.healing import health, healthloop, hostsignals
from kolla_salt.healing.health import CheckResult, HealthTracker, RestartLedger, RestartPolicy, Watched

OK, FAIL = CheckResult(True, "healthy"), CheckResult(False, "exit code 1: unhealthy")
T0 = 1_700_000_000.0


def item(name="memcached", started="2024-01-01T00:00:00.5Z", start_period=0, cid="c" * 64):
    return Watched(name=name, container_id=cid, started_at=started, test=("kolla_check",),
                   timeout=2, start_period=start_period)


def run(tracker, results, watched=None, start=T0, step=1.0):
    """Feeds results one per step; returns [(step index, tag)] of the events."""
    watched = watched or item()
    out = []
    for i, result in enumerate(results):
        for tag, data in tracker.observe(watched, result, start + i * step):
            out.append((i, tag))
            assert data["name"] == watched.name and data["incarnation"] == watched.incarnation
    return out


# -- debouncing ------------------------------------------------------------------

def test_unhealthy_only_after_threshold_consecutive_failures():
    tracker = HealthTracker(threshold=3, remind=0)
    assert run(tracker, [FAIL, FAIL, OK, FAIL, FAIL, FAIL, FAIL, FAIL]) == [(5, "memcached/unhealthy")]


def test_healthy_fires_once_on_recovery_and_never_for_a_container_always_healthy():
    tracker = HealthTracker(threshold=2, remind=0)
    assert run(tracker, [OK, OK, OK]) == []
    assert run(tracker, [FAIL, FAIL, FAIL, OK, OK, FAIL, OK]) == [(1, "memcached/unhealthy"), (3, "memcached/healthy")]


def test_a_new_incarnation_that_fails_again_is_reported_again():
    """After a restart the container never passed once: still news, else the
    reactor would never hear that its restart did not help."""
    tracker = HealthTracker(threshold=2, remind=0)
    assert run(tracker, [FAIL, FAIL, FAIL]) == [(1, "memcached/unhealthy")]
    restarted = item(started="2024-01-01T00:05:00Z")
    assert run(tracker, [FAIL, FAIL, FAIL], restarted, start=T0 + 10) == [(1, "memcached/unhealthy")]
    # and its recovery is reported once
    assert run(tracker, [OK, OK], restarted, start=T0 + 20) == [(0, "memcached/healthy")]


def test_failures_do_not_count_during_the_start_period():
    started = "2023-11-14T22:13:20Z"   # == T0
    assert health.docker_time(started) == T0
    tracker = HealthTracker(threshold=2, remind=0)
    events = run(tracker, [FAIL] * 8, item(started=started, start_period=5), start=T0)
    assert events == [(6, "memcached/unhealthy")]   # failures at 5 and 6 s count


def test_a_standing_failure_is_repeated_at_doubling_gaps_up_to_the_maximum():
    tracker = HealthTracker(threshold=1, remind=2, remind_max=8)
    events = run(tracker, [FAIL] * 40)
    assert [i for i, _ in events] == [0, 2, 6, 14, 22, 30, 38]
    assert all(tag == "memcached/unhealthy" for _, tag in events)


def test_forget_drops_counters_of_removed_containers_only():
    tracker = HealthTracker(threshold=2, remind=0)
    run(tracker, [FAIL], item("a"))
    run(tracker, [FAIL], item("b"))
    tracker.forget_others({"a": "exited"})
    assert set(tracker.tracks) == {"a"}
    assert run(tracker, [FAIL], item("a")) == [(0, "a/unhealthy")]   # "a" kept its count


def test_docker_time_reads_nanoseconds_and_the_zero_time():
    assert health.docker_time("2023-11-14T22:13:20.123456789Z") == pytest.approx(T0 + 0.123456)
    assert health.docker_time("0001-01-01T00:00:00Z") == 0.0


# -- which containers are watched ----------------------------------------------

def fake_container(name, labels_name=None, status="running", check=True, paused=False):
    spec = {"healthcheck": {"test": ["kolla_check", "tcp", "127.0.0.1:1"], "timeout": 3, "start_period": 4}
            if check else None}
    return SimpleNamespace(
        name=name, id="f" * 64,
        labels={"kolla.name": labels_name or name, "kolla.spec": json.dumps(spec), "kolla.generation": "2"},
        attrs={"State": {"Status": status, "Paused": paused, "StartedAt": "2024-01-01T00:00:00Z"}})


def test_watched_containers_are_running_current_checked_and_inside_the_prefix():
    watched = health.watched_from_container(fake_container("kst-memcached"), prefix="kst-")
    assert (watched.test, watched.timeout, watched.start_period, watched.generation) == (
        ("kolla_check", "tcp", "127.0.0.1:1"), 3, 4, "2")
    assert health.watched_from_container(fake_container("kst-memcached.gen1", "kst-memcached")) is None
    assert health.watched_from_container(fake_container("memcached"), prefix="kst-") is None
    assert health.watched_from_container(fake_container("kst-x", check=False)) is None
    assert health.watched_from_container(fake_container("kst-x", status="exited")) is None
    assert health.watched_from_container(fake_container("kst-x", paused=True)) is None


class CountingClient:
    """A Docker client whose containers.get counts the inspections."""
    def __init__(self, containers):
        self.by_name, self.inspected = containers, []
        self.containers = SimpleNamespace(get=self.get)

    def get(self, name):
        self.inspected.append(name)
        return self.by_name[name]


def test_the_watchlist_inspects_a_container_again_only_when_something_changed():
    container = fake_container("kst-memcached")
    container.attrs["State"]["Pid"] = 40
    client = CountingClient({"kst-memcached": container})
    watchlist = health.Watchlist()
    entry = {"Id": container.id, "State": "running", "Status": "Up 2 minutes (healthy)"}
    for _ in range(3):   # passes that see nothing new: one inspection in all
        assert [w.name for w in watchlist.update(client, {"kst-memcached": entry}, {40: (1, "S", 0)})] == [
            "kst-memcached"]
    assert client.inspected == ["kst-memcached"]
    watchlist.update(client, {"kst-memcached": {**entry, "Status": "Up 3 minutes (healthy)"}}, {40: (1, "S", 0)})
    assert len(client.inspected) == 2            # Docker's status text changed
    watchlist.update(client, {"kst-memcached": {**entry, "Status": "Up 3 minutes (healthy)"}}, {41: (1, "S", 0)})
    assert len(client.inspected) == 3            # its process is gone: restarted
    assert watchlist.update(client, {"kst-memcached": {**entry, "State": "exited"}}, {}) == []
    assert watchlist.known == {}                 # not running: forgotten


def test_the_watchlist_leaves_alone_containers_of_another_deployment(tmp_path):
    container = fake_container("memcached")
    container.attrs["State"]["Pid"] = 40
    entries = {"memcached": {"Id": container.id, "State": "running", "Status": "Up 2 minutes"}}
    # the same name, the same (empty) prefix, but its history is in another state folder
    assert health.Watchlist(tmp_path).update(CountingClient({"memcached": container}), entries, {40: (1, "S", 0)}) == []
    History(tmp_path, "memcached").set_running(1)
    assert [w.name for w in health.Watchlist(tmp_path).update(CountingClient({"memcached": container}), entries,
                                                             {40: (1, "S", 0)})] == ["memcached"]


# -- restart policy ------------------------------------------------------------------

def decide_and_apply(policy, record, incarnation, now):
    decision = policy.decide(record, incarnation, now)
    return decision, policy.apply(record, decision, incarnation, now)


def test_first_restart_is_immediate_then_backoff_doubles_then_give_up_once():
    policy = RestartPolicy(cap=3, window=600, backoff=10)
    record = {}
    steps = []
    for now, incarnation in [(0, "i0"), (5, "i1"), (10, "i1"), (15, "i2"), (30, "i2"), (31, "i3"), (32, "i3")]:
        decision, record = decide_and_apply(policy, record, incarnation, now)
        steps.append((decision.action, decision.retry_in))
    assert steps == [("restart", 0), ("wait", 5.0), ("restart", 0), ("wait", 15.0), ("restart", 0),
                     ("give-up", 0), ("left-alone", 0)]
    assert record["gave_up"] == "i3" and record["restarts"] == [0, 10, 30]


def test_restarts_older_than_the_window_no_longer_count():
    policy = RestartPolicy(cap=2, window=100, backoff=1)
    record = {"restarts": [0, 10]}
    assert policy.decide(record, "i", 50).action == "give-up"
    assert policy.decide(record, "i", 105).action == "restart"   # the one at 0 left the window
    assert policy.apply(record, policy.decide(record, "i", 105), "i", 105)["restarts"] == [10, 105]


def test_after_giving_up_a_new_incarnation_is_judged_afresh():
    """Someone else (an operator, Docker after a crash) restarted it: the give-up
    was about the old incarnation; with the cap still full it is announced again."""
    policy = RestartPolicy(cap=1, window=600, backoff=1)
    record = {"restarts": [0], "gave_up": "old"}
    assert policy.decide(record, "old", 10).action == "left-alone"
    decision, record = decide_and_apply(policy, record, "new", 10)
    assert decision.action == "give-up" and record["gave_up"] == "new"


def test_ledger_update_persists_records(tmp_path):
    ledger = RestartLedger(tmp_path / "health" / "restarts.json")
    assert ledger.read() == {}
    with ledger.update() as records:
        records["a"] = {"restarts": [1.0]}
    with ledger.update() as records:
        records["a"]["restarts"].append(2.0)
    assert ledger.read() == {"a": {"restarts": [1.0, 2.0]}}


class FakeClient:
    def __init__(self, container):
        self.container = container
        self.containers = self

    def get(self, name):
        if self.container is None or name != self.container.name:
            raise docker.errors.NotFound(name)
        return self.container


def restartable(name="kst-memcached"):
    container = fake_container(name)
    container.restarts = []
    container.restart = lambda timeout: container.restarts.append(timeout)
    return container


def test_handle_unhealthy_restarts_waits_and_gives_up(tmp_path):
    container = restartable()
    client, ledger = FakeClient(container), RestartLedger(tmp_path / "restarts.json")
    policy = RestartPolicy(cap=2, window=600, backoff=10)
    act = lambda now: health.handle_unhealthy(client, ledger, policy, "kst-memcached", now=now)["action"]
    assert [act(0), act(1), act(10), act(20), act(21)] == ["restarted", "wait", "restarted", "gave-up", "left-alone"]
    assert container.restarts == [2, 2]


def test_handle_unhealthy_leaves_stale_reports_and_foreign_containers_alone(tmp_path):
    container = restartable()
    ledger, policy = RestartLedger(tmp_path / "restarts.json"), RestartPolicy()
    result = health.handle_unhealthy(FakeClient(container), ledger, policy, "kst-memcached", incarnation="old@x")
    assert result["action"] == "stale"
    for client, name, prefix in [(FakeClient(container), "kst-memcached", "other-"),
                                 (FakeClient(None), "kst-memcached", ""),
                                 (FakeClient(restartable("kst-memcached.gen1")), "kst-memcached.gen1", "")]:
        if name.endswith(".gen1"):
            client.container.labels["kolla.name"] = "kst-memcached"
        assert health.handle_unhealthy(client, ledger, policy, name, prefix=prefix)["action"] == "ignored"
    assert container.restarts == [] and ledger.read() == {}


def test_a_redeployed_container_starts_with_a_clean_record(tmp_path):
    container = restartable()
    client, ledger = FakeClient(container), RestartLedger(tmp_path / "restarts.json")
    policy = RestartPolicy(cap=1, window=600, backoff=1)
    assert health.handle_unhealthy(client, ledger, policy, "kst-memcached", now=0)["action"] == "restarted"
    container.id = "e" * 64
    assert health.handle_unhealthy(client, ledger, policy, "kst-memcached", now=5)["action"] == "restarted"


def test_a_second_report_of_a_failure_being_restarted_is_stale_not_a_give_up(tmp_path):
    """Two reactions to the same incarnation (a report and its reminder) run at
    once: the second must wait for the first's restart and then see a new
    incarnation. Deciding on the old one while the restart is under way would
    count the restart in progress and give up on a container just restarted
    (and announce the give-up twice)."""
    container = restartable()
    restarting = threading.Event()

    def slow_restart(timeout):
        restarting.set()
        threading.Event().wait(0.3)   # docker restart takes a while
        container.restarts.append(timeout)
        container.attrs["State"]["StartedAt"] = "2024-01-01T00:01:00Z"
    container.restart = slow_restart
    client, ledger = FakeClient(container), RestartLedger(tmp_path / "restarts.json")
    policy = RestartPolicy(cap=2, window=600, backoff=1)
    reported = health.watched_from_container(container).incarnation
    with ledger.update() as records:   # one restart long ago: one more is allowed, then the cap
        records["kst-memcached"] = {"container": container.id, "restarts": [T0 - 100]}
    results = []
    first = threading.Thread(target=lambda: results.append(
        health.handle_unhealthy(client, ledger, policy, "kst-memcached", incarnation=reported, now=T0)))
    first.start()
    assert restarting.wait(5)
    results.append(health.handle_unhealthy(client, ledger, policy, "kst-memcached", incarnation=reported, now=T0))
    first.join()
    assert sorted(r["action"] for r in results) == ["restarted", "stale"]
    assert container.restarts == [2] and not ledger.read()["kst-memcached"]["gave_up"]


# -- beacon configuration and the daemon's config ---------------------------------------

@pytest.mark.parametrize("config, ok", [
    ([{"interval": 5}, {"threshold": 3}, {"prefix": "kst-"}, {"remind": 10}], True),
    ([], True),
    ({"threshold": 3}, False),
    ([{"threshold": 0}], False),
    ([{"threshold": "3"}], False),
    ([{"treshold": 3}], False),
])
def test_validate_beacon_config(config, ok):
    assert health.validate_beacon_config(config)[0] is ok


def settings_with(**changes):
    return {**default_settings(), **changes}


def test_minion_opts_come_from_settings(tmp_path):
    settings = settings_with(kolla_state_directory=str(tmp_path), container_name_prefix="kst-",
                             health_check_interval=2, health_restart_cap=5)
    opts = healthloop.minion_opts(settings)
    beacon = health.merge_config(opts["beacons"]["kolla_health"])
    assert beacon == {"interval": 1, "check_interval": 2, "retry_interval": 1, "threshold": 3, "probe": 1,
                      "pressure_limit": 0.2, "slow_factor": 3, "stall_window": 10, "prefix": "kst-",
                      "remind": 10, "remind_max": 600,
                      "status_file": str(tmp_path / "health" / "status.json"), "state_dir": str(tmp_path)}
    assert health.validate_beacon_config(opts["beacons"]["kolla_health"])[0]
    assert opts["kolla_health"]["restart_cap"] == 5 and opts["kolla_health"]["prefix"] == "kst-"
    assert opts["master_type"] == "disable" and opts["engines"] == [{"reactor": {}}]
    for key in ("cachedir", "pki_dir", "pidfile", "log_file", "extension_modules"):
        assert opts[key].startswith(str(tmp_path)), key
    assert healthloop.minion_opts(settings_with(kolla_state_directory="/var/lib/kolla-salt"))["sock_dir"] == \
        "/var/lib/kolla-salt/salt/health/sock"


def test_the_daemon_runs_the_backup_schedule_with_or_without_the_health_loop(tmp_path):
    """mariadb_backup_interval_minutes puts kolla_backup.scheduled in the daemon's
    schedule (each minute, and at its start), given the operator folder; the beacon is
    there only with enable_health_loop."""
    settings = settings_with(kolla_state_directory=str(tmp_path), mariadb_backup_interval_minutes=60)
    assert "schedule" not in healthloop.minion_opts(settings_with(kolla_state_directory=str(tmp_path)), "/etc/x")
    assert "schedule" not in healthloop.minion_opts(settings)   # no operator folder: nothing to read
    job = healthloop.minion_opts(settings, "/etc/x")["schedule"]["kolla-mariadb-backup"]
    assert job["function"] == "kolla_backup.scheduled" and job["kwargs"] == {"config_dir": "/etc/x"}
    assert job["seconds"] == 60 and job["run_on_start"]
    quiet = healthloop.minion_opts({**settings, "enable_health_loop": False}, "/etc/x")
    assert quiet["beacons"] == {} and "schedule" in quiet


def test_a_deep_state_folder_moves_the_sockets_to_a_short_path(tmp_path):
    deep = tmp_path / ("x" * 90)
    opts = healthloop.minion_opts(settings_with(kolla_state_directory=str(deep)))
    assert len(opts["sock_dir"] + "/minion_event_0123456789_pub.ipc") < 108


# -- checks in the background ------------------------------------------------------

class FakeExecAPI:
    """exec_* of the Docker API: each check blocks until `release` is set for it."""

    def __init__(self):
        self.release, self.codes, self.created = {}, {}, []

    def exec_create(self, container_id, cmd):
        exec_id = f"exec{len(self.created)}"
        self.created.append(exec_id)
        self.release[exec_id] = threading.Event()
        return {"Id": exec_id}

    def exec_start(self, exec_id):
        self.release[exec_id].wait(5)
        return b"healthy"

    def exec_inspect(self, exec_id):
        return {"ExitCode": self.codes.get(exec_id, 0), "Pid": 0}


def test_checks_run_in_the_background_and_a_hung_one_fails_at_its_timeout():
    client = SimpleNamespace(api=FakeExecAPI())
    runner, watched = health.CheckRunner(), item()   # timeout 2 s
    runner.start(client, [(watched, 2)], now=0.0)
    assert runner.collect(client, now=1.0) == []            # still running: nothing to report, no waiting
    runner.start(client, [(watched, 2)], now=1.0)
    assert len(client.api.created) == 1                       # one check in flight per container
    client.api.release["exec0"].set()
    runner.in_flight[watched.name].thread.join(2)
    [(_, passed, _)] = runner.collect(client, now=1.5)
    assert passed.ok and passed.detail == "healthy" and 0 <= passed.duration < 1.5
    runner.start(client, [(watched, 2)], now=1.5)             # the next check starts
    assert runner.collect(client, now=2.9) == []              # 1.4 s in: not yet due
    [(_, hung, _)] = runner.collect(client, now=3.1)          # its 2 s timeout falls due at this pass (jitter)
    assert not hung.ok and hung.timed_out and "timed out after 2 s" in hung.detail
    client.api.release["exec1"].set()


def sample(ticks=100, stopped=False, io_wait=False):
    return hostsignals.ServiceSample(ticks=ticks, stopped=stopped, io_wait=io_wait)


def test_a_check_running_while_a_service_process_is_stopped_ends_after_the_probe_time():
    client = SimpleNamespace(api=FakeExecAPI())
    runner, watched = health.CheckRunner(probe=1.0), item()
    runner.start(client, [(watched, 5)], now=0.0, samples={watched.name: sample(ticks=7)})
    frozen = {watched.name: sample(ticks=7, stopped=True)}
    assert runner.collect(client, now=0.4, samples=frozen) == []     # a check may take a moment
    [(_, result, evidence)] = runner.collect(client, now=0.6, samples=frozen)   # at the pass near 1 s
    assert not result.ok and not result.timed_out and "stopped" in result.detail
    assert evidence.stopped and evidence.ticks_before == evidence.ticks == 7
    assert health.judge(result, evidence, usual=0.05, pressure_limit=0.2) == "hung"
    client.api.release["exec0"].set()


def test_a_removed_container_has_no_check_left_in_flight():
    client = SimpleNamespace(api=FakeExecAPI())
    runner = health.CheckRunner()
    runner.start(client, [(item("a"), 2), (item("b"), 2)], now=0.0)
    runner.forget_others(["b"])
    assert list(runner.in_flight) == ["b"] and list(runner.last_start) == ["b"]
    for event in client.api.release.values():
        event.set()


# -- hung or slow: the rule ---------------------------------------------------------

def timed_out(seconds=5.0):
    return CheckResult(False, "check timed out", duration=seconds, timed_out=True)


LOADED, CALM = dict(pressure=0.6), dict(pressure=0.02)


@pytest.mark.parametrize("result, evidence, verdict", [
    (OK, health.Evidence(stopped=True), "ok"),                                        # a pass is a pass
    (FAIL, health.Evidence(stopped=True), "hung"),                                    # stopped: cannot answer
    (timed_out(), health.Evidence(stopped=True, **LOADED), "hung"),                   # ... whatever the load
    (timed_out(), health.Evidence(**LOADED), "slow"),                                 # slow under pressure
    (timed_out(), health.Evidence(io_wait=True, **CALM), "slow"),                     # waiting on the disk
    (CheckResult(False, "x", duration=0.1), health.Evidence(**LOADED), "failed"),     # fails fast: not load
    (timed_out(), health.Evidence(**CALM), "failed"),                                 # no load to explain it
])
def test_judge_tells_hung_from_slow_from_failed(result, evidence, verdict):
    assert health.judge(result, evidence, usual=0.2, pressure_limit=0.2) == verdict


def test_a_check_over_twice_its_usual_time_under_pressure_is_slow_even_without_timing_out():
    result = CheckResult(False, "exit code 1", duration=2.5)
    assert health.judge(result, health.Evidence(**LOADED), usual=1.0, pressure_limit=0.2) == "slow"
    assert health.judge(result, health.Evidence(**LOADED), usual=2.0, pressure_limit=0.2) == "failed"


def observe_all(tracker, steps, watched=None, start=T0, step=1.0):
    """Feeds (result, evidence) pairs one per step; returns [(index, tag, data)]."""
    watched = watched or item()
    return [(i, tag, data) for i, (result, evidence) in enumerate(steps)
            for tag, data in tracker.observe(watched, result, start + i * step, evidence)]


def test_a_stopped_service_is_reported_at_once_as_a_certain_hang():
    tracker = HealthTracker(threshold=3, remind=0)
    [(i, tag, data)] = observe_all(tracker, [(OK, health.Evidence()), (FAIL, health.Evidence(stopped=True))])
    assert (i, tag, data["verdict"], data["certain"]) == (1, "memcached/unhealthy", "hung", True)


def test_a_slow_service_is_reported_slow_once_it_lasts_never_unhealthy_and_its_timeout_grows():
    tracker = HealthTracker(threshold=2, remind=0, slow_factor=3)
    watched = item()
    events = observe_all(tracker, [(OK, health.Evidence())] +
                         [(timed_out(), health.Evidence(ticks_before=1, ticks=5, **LOADED))] * 6 +
                         [(OK, health.Evidence())])
    assert [(i, tag) for i, tag, _ in events] == [(2, "memcached/slow"), (7, "memcached/healthy")]
    assert tracker.timeout(watched) == watched.timeout
    observe_all(tracker, [(timed_out(), health.Evidence(**LOADED))], start=T0 + 10)
    assert tracker.timeout(watched) == 3 * watched.timeout       # at once
    assert tracker.snapshot()["memcached"]["status"] == "healthy"  # one slow check is not news
    observe_all(tracker, [(timed_out(), health.Evidence(**LOADED))], start=T0 + 20)
    assert tracker.snapshot()["memcached"]["status"] == "slow"
    # a slow container keeps the normal pace: checks add load
    assert not tracker.due(watched, since_last=2.0) and tracker.due(watched, since_last=5.0)


def test_failing_checks_come_sooner_and_a_stopped_process_is_checked_at_once():
    tracker = HealthTracker(threshold=3, interval=5, retry_interval=1, remind=0)
    watched = item()
    assert tracker.due(watched, since_last=1.0)              # not passed since it started: soon
    observe_all(tracker, [(OK, health.Evidence())])
    assert not tracker.due(watched, since_last=1.0) and tracker.due(watched, since_last=1.0, stopped=True)
    assert tracker.due(watched, since_last=5.0)
    observe_all(tracker, [(FAIL, health.Evidence())], start=T0 + 10)
    assert tracker.due(watched, since_last=1.0)


def test_a_pass_of_dockers_own_check_counts_for_a_passing_container_only():
    tracker = HealthTracker(threshold=3, interval=5, retry_interval=1, remind=0)
    watched = dataclasses.replace(item(), docker_interval=10)
    assert tracker.due(watched, since_last=math.inf, since_docker_pass=0.5)   # never checked by the loop
    observe_all(tracker, [(OK, health.Evidence())])
    assert not tracker.due(watched, since_last=6.0, since_docker_pass=2.0)   # Docker's pass 2 s ago
    assert tracker.due(watched, since_last=6.0, since_docker_pass=5.0)       # halfway to Docker's next
    # Docker's next check is due: waited for, up to DOCKER_GRACE late; then the loop's own
    assert not tracker.due(watched, since_last=5.0, since_docker_pass=10.0)
    assert tracker.due(watched, since_last=6.5, since_docker_pass=10.0 + health.DOCKER_GRACE)
    assert tracker.due(watched, since_last=6.0, since_docker_pass=math.inf)   # Docker's last check failed
    assert tracker.due(watched, since_last=6.0, since_docker_pass=2.0, stopped=True)
    # a check in it just failed (Docker's event): checked at once, not at the next interval
    assert tracker.due(watched, since_last=1.0, since_docker_pass=2.0, check_failed=True)
    observe_all(tracker, [(FAIL, health.Evidence())], start=T0 + 10)
    assert tracker.due(watched, since_last=1.0, since_docker_pass=0.5)      # failing: its own checks
    # Reported slow: its own checks at the normal pace, so that its recovery is seen.
    observe_all(tracker, [(timed_out(), health.Evidence(ticks_before=1, ticks=5, **LOADED))] * 3, start=T0 + 20)
    assert tracker.snapshot()["memcached"]["status"] == "slow"
    assert tracker.due(watched, since_last=5.0, since_docker_pass=0.5)
    assert not tracker.due(watched, since_last=1.0, check_failed=True)    # slow: no sooner for a failure


def test_dockers_latest_check_counts_if_it_passed_in_time_after_the_last_start():
    started = "2026-01-01T00:00:10.5Z"

    def state(*log):
        return {"StartedAt": started, "Health": {"Log": [
            {"Start": f"2026-01-01T00:00:{b:02d}.000000001Z", "End": f"2026-01-01T00:00:{e:02d}.5Z", "ExitCode": code}
            for b, e, code in log]}}
    began = health.docker_time("2026-01-01T00:00:20Z")
    assert health.docker_pass(state((15, 15, 1), (20, 20, 0)), timeout=2) == pytest.approx(began)
    assert health.docker_pass(state((15, 15, 0), (20, 20, 1)), timeout=2) == 0.0   # the latest failed
    assert health.docker_pass(state((20, 23, 0)), timeout=2) == 0.0                 # slower than the timeout
    assert health.docker_pass(state((5, 5, 0)), timeout=2) == 0.0                   # before the last start
    assert health.docker_pass({"StartedAt": started}, timeout=2) == 0.0             # no check yet


def test_a_stateful_service_failing_without_a_certain_hang_is_reported_failing_not_unhealthy():
    tracker = HealthTracker(threshold=2, remind=0)
    db = Watched(name="mariadb", container_id="d" * 64, started_at="2024-01-01T00:00:00Z", test=("x",),
                 timeout=2, start_period=0, stateful=True)
    progressing = [(FAIL, health.Evidence(ticks_before=i, ticks=i + 1, **CALM)) for i in range(6)]
    events = observe_all(tracker, [(OK, health.Evidence())] + progressing + [(OK, health.Evidence())], db)
    assert [(i, tag) for i, tag, _ in events] == [(2, "mariadb/failing"), (7, "mariadb/healthy")]
    # the same, frozen: a certain hang, reported at once
    [(_, tag, data)] = observe_all(tracker, [(FAIL, health.Evidence(stopped=True))], db, start=T0 + 100)
    assert (tag, data["verdict"], data["certain"]) == ("mariadb/unhealthy", "hung", True)


def test_no_cpu_progress_over_the_stall_window_on_a_calm_host_is_a_certain_hang():
    tracker = HealthTracker(threshold=100, remind=0, stall_window=10, pressure_limit=0.2)
    calm = {"cpu": 0, "io": 0, "memory": 0}
    still = [(timed_out(5), health.Evidence(ticks_before=40, ticks=40, psi_before=calm, psi=calm))] * 3
    events = observe_all(tracker, still, step=5.0)
    assert [(i, tag, d["verdict"], d["certain"]) for i, tag, d in events] == [
        (1, "memcached/unhealthy", "stalled", True)]   # 10 s since the first check began (at -5 s)
    # the same stillness while the host is loaded (80 % of the time stalled) is not certain
    loaded = {"cpu": 12_000_000, "io": 0, "memory": 0}
    tracker = HealthTracker(threshold=100, remind=0, stall_window=10, pressure_limit=0.2)
    still = [(timed_out(5), health.Evidence(ticks_before=40, ticks=40, psi_before=calm, psi=calm)),
             (timed_out(5), health.Evidence(ticks_before=40, ticks=40, psi_before=calm, psi=loaded)),
             (timed_out(5), health.Evidence(ticks_before=40, ticks=40, psi_before=calm, psi=loaded))]
    assert observe_all(tracker, still, step=5.0) == []
    # ... and on a host without PSI, where the load is unknown
    tracker = HealthTracker(threshold=100, remind=0, stall_window=10, pressure_limit=0.2)
    assert observe_all(tracker, [(timed_out(5), health.Evidence(ticks_before=40, ticks=40))] * 3, step=5.0) == []


def test_an_idle_service_whose_check_fails_fast_is_not_stalled():
    """A check that answers (a broken script, bad credentials) never reached the
    service, which spends no CPU time while idle: no proof of a deadlock, so a
    stateful container is not restarted however long it lasts."""
    tracker = HealthTracker(threshold=3, remind=0, stall_window=10, pressure_limit=0.2)
    calm = {"cpu": 0, "io": 0, "memory": 0}
    idle = [(FAIL, health.Evidence(ticks_before=40, ticks=40, psi_before=calm, psi=calm))] * 30
    events = observe_all(tracker, idle, dataclasses.replace(item(), stateful=True), step=1.0)
    assert [tag for _, tag, _ in events] == ["memcached/failing"]


def test_a_container_that_never_passed_and_is_busy_starting_is_given_time():
    """A loaded host starts a service slowly; its socket is not there yet, so the
    check fails fast. While it has never passed and makes progress, that is a
    start, up to slow_factor times its start period (at least 5 s)."""
    tracker = HealthTracker(threshold=2, remind=0, slow_factor=3)
    started = "2023-11-14T22:13:20Z"   # == T0
    busy = [(FAIL, health.Evidence(ticks_before=i, ticks=i + 3)) for i in range(20)]
    events = observe_all(tracker, busy, item(started=started, start_period=5))
    assert [(i, tag) for i, tag, _ in events] == [(16, "memcached/unhealthy")]   # failures at 15, 16 s


def test_the_unhealthy_event_says_how_long_it_had_been_healthy():
    tracker = HealthTracker(threshold=1, remind=0)
    steps = [(OK, health.Evidence())] * 30 + [(FAIL, health.Evidence())]
    [(_, _, data)] = observe_all(tracker, steps)
    assert data["healthy_for"] == 30.0    # passing from 0 to 30 s, failing from then
    [(_, _, data)] = observe_all(tracker, [(FAIL, health.Evidence())], item(started="2024-01-02T00:00:00Z"),
                                 start=T0 + 40)
    assert data["healthy_for"] == 0.0     # the restarted one never passed


def test_a_container_healthy_for_a_whole_window_has_its_cap_reset_even_after_a_give_up():
    policy = RestartPolicy(cap=1, window=100, backoff=1)
    record = {"restarts": [0], "gave_up": "i"}
    assert policy.decide(record, "i", 50, healthy_for=40).action == "left-alone"
    decision = policy.decide(record, "i", 150, healthy_for=100)
    assert decision.action == "restart"
    assert policy.apply(record, decision, "i", 150, healthy_for=100) == {"restarts": [150], "gave_up": None}


def test_the_status_snapshot_says_what_the_beacon_knows(tmp_path):
    tracker = HealthTracker(threshold=1, remind=0)
    observe_all(tracker, [(OK, health.Evidence())], item("a"))
    observe_all(tracker, [(timed_out(), health.Evidence(**LOADED))], item("b"))
    path = tmp_path / "health" / "status.json"
    health.write_json(path, tracker.snapshot())
    seen = health.read_json(path)
    assert {name: s["status"] for name, s in seen.items()} == {"a": "healthy", "b": "slow"}


# -- acting: stateful, clusters, the history -------------------------------------------

def stateful_container(name, cluster="kst-rabbitmq", state="running", health_status="healthy"):
    container = restartable(name)
    spec = json.loads(container.labels["kolla.spec"])
    spec.update(stateful=True, cluster=cluster)
    container.labels["kolla.spec"] = json.dumps(spec)
    container.listing = {"Labels": container.labels, "Names": [f"/{name}"], "State": state,
                         "Status": f"Up 1 minute ({health_status})"}
    return container


class FakeEngine(FakeClient):
    """containers.get and the raw listing (cluster members) over several containers."""

    def __init__(self, *containers):
        self.by_name = {c.name: c for c in containers}
        self.containers = self
        self.api = SimpleNamespace(containers=lambda **_: [c.listing for c in self.by_name.values()])

    def get(self, name):
        if name not in self.by_name:
            raise docker.errors.NotFound(name)
        return self.by_name[name]


def test_a_hung_container_is_killed_at_once(tmp_path):
    rabbit = stateful_container("kst-rabbitmq")
    engine, ledger, policy = FakeEngine(rabbit), RestartLedger(tmp_path / "restarts.json"), RestartPolicy()
    result = health.handle_unhealthy(engine, ledger, policy, "kst-rabbitmq", verdict="hung")
    assert result["action"] == "restarted" and rabbit.restarts == [0]   # a stopped process gets SIGKILL


def test_a_cluster_member_is_not_restarted_while_another_member_is_down(tmp_path):
    first = stateful_container("kst-rabbitmq-1")
    second = stateful_container("kst-rabbitmq-2", health_status="health: starting")
    other = stateful_container("kst-mariadb", cluster="kst-mariadb", health_status="unhealthy")
    engine, ledger, policy = FakeEngine(first, second, other), RestartLedger(tmp_path / "r.json"), RestartPolicy()
    result = health.handle_unhealthy(engine, ledger, policy, "kst-rabbitmq-1", verdict="hung")
    assert result["action"] == "held" and "kst-rabbitmq-2" in result["reason"] and first.restarts == []
    second.listing["Status"] = "Up 2 minutes (healthy)"   # back: the other cluster's trouble is not ours
    result = health.handle_unhealthy(engine, ledger, policy, "kst-rabbitmq-1", verdict="hung")
    assert result["action"] == "restarted"


def test_a_restart_by_the_loop_is_written_to_the_generations_history(tmp_path):
    from kolla_salt.containers.generations import History
    container = restartable()
    history = History(tmp_path, "kst-memcached")
    history.add(2, {"image": "kolla-salt/memcached"}, "sha256:" + "1" * 64, "cfg")
    history.set_running(2)
    health.handle_unhealthy(FakeClient(container), RestartLedger(tmp_path / "r.json"), RestartPolicy(),
                            "kst-memcached", verdict="hung", state_dir=tmp_path, now=T0)
    [record] = history.records()
    assert record["outcome"] == "running" and record["restarts"] == [{"at": T0, "verdict": "hung"}]


# -- what the host shows ----------------------------------------------------------------

def fake_proc(root, processes, psi=None):
    """processes: {pid: (ppid, state, utime, stime, comm)}"""
    for pid, (ppid, state, utime, stime, comm) in processes.items():
        (root / str(pid)).mkdir(parents=True)
        rest = [state, str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 10
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(rest)}\n")
    if psi:
        (root / "pressure").mkdir()
        for resource, total in psi.items():
            (root / "pressure" / resource).write_text(
                f"some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 total=0\n")


def test_a_containers_service_processes_are_the_descendants_of_its_init(tmp_path):
    fake_proc(tmp_path, {1: (0, "S", 0, 0, "systemd"), 100: (1, "S", 1, 1, "tini"),
                         101: (100, "T", 30, 10, "memcached"), 102: (101, "S", 5, 0, "odd) name"),
                         200: (1, "R", 99, 99, "kolla_check")})   # a docker exec: not a descendant
    table = hostsignals.process_table(str(tmp_path))
    found = hostsignals.service_sample(table, 100)
    assert (found.pids, found.ticks, found.stopped, found.io_wait) == ((101, 102), 45, True, False)
    assert hostsignals.service_sample(table, 200).pids == (200,)   # no children: the process itself
    assert hostsignals.service_sample(table, 999) is None


def test_pressure_is_the_share_of_a_window_some_task_waited(tmp_path):
    fake_proc(tmp_path, {}, psi={"cpu": 3_000_000, "io": 1_000_000})
    before = hostsignals.read_pressure(str(tmp_path))
    assert before == {"cpu": 3_000_000, "io": 1_000_000}
    after = {"cpu": 5_000_000, "io": 1_500_000}
    assert hostsignals.pressure_between(before, after, 4.0) == pytest.approx(0.5)
    assert hostsignals.pressure_between({}, after, 4.0) is None   # no PSI: unknown, not calm


def test_a_slow_container_passing_only_with_its_longer_timeout_stays_slow():
    tracker = HealthTracker(threshold=2, remind=0, slow_factor=3)
    late_pass = CheckResult(True, "healthy", duration=4.0)     # timeout 2, extended to 6
    events = observe_all(tracker, [(OK, health.Evidence())] + [(timed_out(2), health.Evidence(**LOADED))] * 2 +
                         [(late_pass, health.Evidence())] * 2 +
                         [(CheckResult(True, "healthy", duration=0.1), health.Evidence())])
    assert [(i, tag) for i, tag, _ in events] == [(2, "memcached/slow"), (5, "memcached/healthy")]
    # One check timed out, the next ones pass only with the longer timeout: slow all
    # along, so it is reported slow once that lasts (the threshold), never left unsaid.
    tracker = HealthTracker(threshold=2, remind=0, slow_factor=3)
    events = observe_all(tracker, [(OK, health.Evidence()), (timed_out(2), health.Evidence(**LOADED))] +
                         [(late_pass, health.Evidence())] * 3 +
                         [(CheckResult(True, "healthy", duration=0.1), health.Evidence())])
    assert [(i, tag) for i, tag, _ in events] == [(2, "memcached/slow"), (5, "memcached/healthy")]


def test_status_reads_the_beacons_judgement_without_a_daemon_as_under_a_master(tmp_path):
    """Under a master the beacon runs in the host's salt-minion, not in a health daemon."""
    from kolla_salt.healing.status import health_loop
    from kolla_salt.healing import healthloop
    settings = {"kolla_state_directory": str(tmp_path), "enable_health_loop": True}
    health.write_json(healthloop.status_file(settings), {"kst-rabbitmq": {
        "status": "slow", "detail": "timed out", "incarnation": "abc@2024-01-01T00:00:00Z"}})
    loop = health_loop(settings)
    assert loop["running"] is False and loop["restarts"]["kst-rabbitmq"]["state"] == "slow"
    assert health_loop({**settings, "enable_health_loop": False})["restarts"] == {}


def test_status_notes_what_the_loop_judged_of_the_current_incarnation_only():
    from kolla_salt.healing.status import render
    row = {"name": "kst-rabbitmq", "set": "messaging-control/rabbitmq", "state": "running", "health": "healthy",
           "image": "kolla-salt/rabbitmq", "generation": 1, "started": "2024-01-01T00:00:00Z", "kept_generations": []}
    loop = {"running": True, "pid": 1, "enabled": True, "restarts": {"kst-rabbitmq": {
        "restarts": 0, "gave_up": False, "state": "slow", "incarnation": "abc@2024-01-01T00:00:00Z"}}}
    assert "(health loop: slow: its check fails under host load; not restarted)" in render([row], loop)
    loop["restarts"]["kst-rabbitmq"].update(restarts=1, incarnation="abc@2023-12-31T00:00:00Z")
    assert "(health loop restarts: 1)" in render([row], loop)


def test_a_pause_lasts_while_any_process_holding_one_lives(tmp_path):
    """A deploy's states swap containers side by side, each in a process of its own:
    the first to end does not lift the pause of another that began while it held its
    own, and the pause of a process that was killed lifts by itself."""
    import os
    import signal
    ledger = RestartLedger(tmp_path / "restarts.json")
    ready_read, ready_write = os.pipe()
    with ledger.paused_restarts():
        assert ledger.paused_by() == os.getpid()
        child = os.fork()
        if child == 0:   # another state's process: holds its pause until killed
            with ledger.paused_restarts():
                os.write(ready_write, b"x")
                signal.pause()
            os._exit(0)
        os.read(ready_read, 1)
    try:
        assert ledger.paused_by() == child
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert ledger.paused_by() is None
