"""The all-in-one health loop for real: kolla_salt.healing.healthloop starts a
masterless salt-minion daemon (kolla_health beacon + reactor engine) over the
real Docker engine. Services are frozen (SIGSTOP inside: the process lives,
its check fails, Docker does nothing) and must be restarted as hung and pass
their check again with the default settings (the 10 s goal is measured by
benchmarks/health_recovery.py: a timed assertion fails on a busy CI host); a
service made slow on a loaded host must not be restarted and must be reported
slow; a broken one is restarted up to the cap, reported, and still watched after
it."""
import time

import pytest

from kolla_salt.containers.engine import passes_check
from kolla_salt.healing.status import health_loop
from kolla_salt.declaration.settings import default_settings
from kolla_salt.healing import healthloop
from kolla_salt.healing.health import read_json

from health_helpers import BROKEN_MARKER, host_load, incarnation, memcached_spec, salt_minion_processes, \
    standalone_spec, wait_until
from probes import freeze_service
from health_helpers import health_dir, health_manager, health_prefix  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration

HEAL_GOAL = 10   # seconds from a freeze to a restarted container passing its check (issue 11), printed
SLOW_MARKER = "/tmp/kshealth-slow"


@pytest.fixture
def health_loop_with(health_dir, health_prefix, health_manager):
    """Starts the loop for this test's containers only (its prefix) with the
    default settings changed by the test; returns (settings, bus recorder);
    stops the daemon and checks it is gone."""
    started = []

    def start(**changes):
        settings = {**default_settings(), "kolla_state_directory": str(health_dir / "state"),
                    "container_name_prefix": health_prefix, **changes}
        daemon = healthloop.ensure_health_daemon(settings)
        assert daemon["started"] and daemon["pid"]
        assert healthloop.ensure_health_daemon(settings) == {**daemon, "started": False}, \
            "a running daemon with the same config is kept"
        started.append((settings, daemon["pid"], healthloop.EventTap(settings)))
        return settings, started[-1][2]
    yield start
    for settings, pid, recorder in started:
        recorder.close()
        assert healthloop.stop_health_daemon(settings) == pid
        wait_until(lambda: not salt_minion_processes(healthloop.daemon_root(settings)), 20,
                   what="the daemon's processes ending")


@pytest.mark.parametrize("service", ["memcached", "keystone"])
def test_a_frozen_service_is_restarted_as_hung_and_healthy_again_with_the_default_settings(
        service, health_loop_with, health_manager, health_prefix, docker_client, built_images):
    built_images(service)
    spec = standalone_spec(f"{health_prefix}{service}", service)
    health_manager.ensure(spec)          # returns once the container passes its check
    settings, bus = health_loop_with()
    container = docker_client.containers.get(spec.name)
    before = incarnation(container)
    # The loop has seen it pass (its status file says so); a freeze before that would
    # be a container that never passed, judged by the start rules instead.
    wait_until(lambda: read_json(healthloop.status_file(settings)).get(spec.name, {}).get("status") == "healthy",
               settings["health_check_interval"] + 5, what="the loop's first pass of it")

    freeze_service(container, "uWSGI" if service == "keystone" else "memcached")
    frozen_at = time.monotonic()
    wait_until(lambda: incarnation(container)[0] != before[0] and passes_check(container, spec),
               30, step=0.1, what=f"{service} restarted and healthy")
    healed = time.monotonic() - frozen_at
    reported, restarted = bus.first(f"{spec.name}/unhealthy", frozen_at), bus.first("/restarted", frozen_at)
    print(f"frozen {service}: unhealthy after {reported - frozen_at:.1f} s, restarted after "
          f"{restarted - frozen_at:.1f} s, healthy again after {healed:.1f} s (goal {HEAL_GOAL} s)")
    unhealthy = [data for _, tag, data in bus.events if tag.endswith(f"{spec.name}/unhealthy")]
    assert unhealthy and unhealthy[0]["verdict"] == "hung" and unhealthy[0]["certain"]
    assert bus.tags(f"kolla/health/{spec.name}/restarted") == [f"kolla/health/{spec.name}/restarted"]
    wait_until(lambda: bus.tags(f"{spec.name}/healthy"), 15, what="the beacon's healthy event")
    history = health_manager.history(spec.name).records()
    assert [r.get("verdict") for r in history[-1]["restarts"]] == ["hung"], "history tells the restart"


def test_a_service_slow_on_a_loaded_host_is_reported_slow_and_not_restarted(
        health_loop_with, health_manager, health_prefix, health_dir, docker_client):
    """Its check takes 4 s (timeout 2) while the host is saturated (both CPUs busy
    and a disk writer, for at most 60 s): load explains it, so it is slow."""
    slow_check = ["sh", "-c", f"test ! -e {SLOW_MARKER} || sleep 4; exec kolla_check memcached 127.0.0.1:11211"]
    spec = memcached_spec(f"{health_prefix}memcached")
    spec = type(spec).from_dict({**spec.canonical(), "healthcheck": {
        "test": slow_check, "interval": 1, "timeout": 2, "retries": 2, "start_period": 1}}, where="slow spec")
    health_manager.ensure(spec)
    settings, bus = health_loop_with(health_check_interval=1, health_failure_threshold=2)
    container = docker_client.containers.get(spec.name)
    before = incarnation(container)
    time.sleep(3)

    with host_load(60, health_dir):
        time.sleep(3)   # the load is on
        assert container.exec_run(["touch", SLOW_MARKER]).exit_code == 0
        try:
            wait_until(lambda: bus.tags(f"{spec.name}/slow"), 30, what="the beacon's slow event")
        except AssertionError as missed:
            raise AssertionError(f"{missed}; events: {[(t, d) for _, t, d in bus.events][-12:]}; "
                                 f"status: {health_loop(settings)}") from None
        wait_until(lambda: health_loop(settings)["restarts"].get(spec.name, {}).get("state") == "slow", 10,
                   what="status reporting it slow")
        time.sleep(15)  # slow all along: several checks, none counted
        assert incarnation(container) == before, "a slow service was restarted"
        assert health_loop(settings)["restarts"][spec.name]["state"] == "slow"
        assert not bus.tags(f"{spec.name}/unhealthy") and not bus.tags("kolla/health/")
    assert container.exec_run(["rm", SLOW_MARKER]).exit_code == 0
    wait_until(lambda: bus.tags(f"{spec.name}/healthy"), 30, what="the beacon's healthy event")
    assert incarnation(container) == before


def test_a_flapping_service_is_capped_reported_and_still_watched_after_the_cap(
        health_loop_with, health_manager, health_prefix, docker_client):
    window = 20
    # checked every 5 s: a recovery and a new failure are seen within the test's waits
    settings, bus = health_loop_with(health_restart_cap=2, health_restart_window=window, health_restart_backoff=1,
                                     health_check_interval=5)
    spec = memcached_spec(f"{health_prefix}broken", breakable=True)
    health_manager.ensure(spec)
    neighbour_spec = memcached_spec(f"{health_prefix}neighbour")
    health_manager.ensure(neighbour_spec)
    container = docker_client.containers.get(spec.name)
    neighbour = docker_client.containers.get(neighbour_spec.name)
    neighbour_before = incarnation(neighbour)

    assert container.exec_run(["touch", BROKEN_MARKER]).exit_code == 0
    gave_up = wait_until(lambda: bus.tags(f"kolla/health/{spec.name}/gave-up"), 60, what="the gave-up event")
    assert gave_up == [f"kolla/health/{spec.name}/gave-up"]
    assert len(bus.tags(f"kolla/health/{spec.name}/restarted")) == 2
    left = incarnation(container)
    seen = health_loop(settings)["restarts"][spec.name]
    assert seen["gave_up"] and seen["state"] == "unhealthy", seen

    # Left alone, still watched: the beacon keeps reminding, and sees it recover.
    gave_up_at = bus.first(f"kolla/health/{spec.name}/gave-up")
    wait_until(lambda: bus.tags(f"{spec.name}/unhealthy", since=gave_up_at), 30, what="a reminder")
    assert incarnation(container) == left and container.status == "running"
    assert container.exec_run(["rm", BROKEN_MARKER]).exit_code == 0
    wait_until(lambda: bus.tags(f"{spec.name}/healthy", since=gave_up_at), 20, what="the healthy event")
    assert health_loop(settings)["restarts"][spec.name]["state"] == "healthy"

    # Healthy for a whole window: the cap is reset, a new failure is restarted again.
    time.sleep(window + 2)
    assert container.exec_run(["touch", BROKEN_MARKER]).exit_code == 0
    wait_until(lambda: len(bus.tags(f"kolla/health/{spec.name}/restarted")) == 3, 30, what="a restart after the reset")
    assert bus.tags(f"kolla/health/{spec.name}/gave-up") == gave_up, "the give-up is announced once"
    assert incarnation(neighbour) == neighbour_before, "the healthy neighbour was not touched"


def test_a_stateful_service_is_not_restarted_for_failing_checks_only_for_a_certain_hang(
        health_loop_with, health_manager, health_prefix, docker_client):
    """`stateful: true` in its spec (as mariadb's and rabbitmq's): a check that
    keeps failing is reported, not acted on; a stopped process is."""
    base = memcached_spec(f"{health_prefix}db", breakable=True)
    spec = type(base).from_dict({**base.canonical(), "stateful": True, "cluster": f"{health_prefix}db"},
                                where="stateful spec")
    health_manager.ensure(spec)
    settings, bus = health_loop_with(health_check_interval=1)
    container = docker_client.containers.get(spec.name)
    before = incarnation(container)
    time.sleep(3)

    assert container.exec_run(["touch", BROKEN_MARKER]).exit_code == 0
    wait_until(lambda: bus.tags(f"{spec.name}/failing"), 30, what="the beacon's failing event")
    wait_until(lambda: health_loop(settings)["restarts"].get(spec.name, {}).get("state") == "failing", 10,
               what="status reporting it failing")
    time.sleep(settings["health_stall_window"] + 3)   # past the stall window: failing fast is no stall
    assert incarnation(container) == before and not bus.tags(f"{spec.name}/unhealthy")

    freeze_service(container)
    wait_until(lambda: bus.tags(f"kolla/health/{spec.name}/restarted"), 20, what="the restart of the frozen one")
    unhealthy = [data for _, tag, data in bus.events if tag.endswith(f"{spec.name}/unhealthy")]
    assert unhealthy[0]["verdict"] == "hung" and unhealthy[0]["certain"]
