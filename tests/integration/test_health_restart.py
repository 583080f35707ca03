"""The all-in-one health loop for real: kolla_salt.healthloop starts a
masterless salt-minion daemon (kolla_health beacon + reactor engine) over the
real Docker engine; memcached containers are frozen (SIGSTOP inside: the
process lives, its check fails, Docker does nothing) and the loop must restart
them, give up past the cap, and leave healthy containers alone."""
import time

import pytest

from kolla_salt import healthloop
from kolla_salt.containers import passes_check
from kolla_salt.health import worst_detection
from kolla_salt.inventory import default_settings

from health_helpers import BROKEN_MARKER, CHECK_TIMEOUT, freeze_service, incarnation, memcached_spec, \
    salt_minion_processes, wait_until
from health_helpers import health_dir, health_manager, health_prefix  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration

INTERVAL, THRESHOLD, STOP_TIMEOUT = 1, 2, 2
# Worst case from the freeze to a restarted, passing container: the detection
# (checks run in the background, see health.worst_detection), the restart
# (stop timeout, then SIGKILL) and a start; plus room for a loaded machine.
RECOVERY_BOUND = worst_detection(INTERVAL, THRESHOLD, CHECK_TIMEOUT) + STOP_TIMEOUT + 10


@pytest.fixture
def health_daemon(health_dir, health_prefix, health_manager):
    """Starts the loop for this test's containers only (its prefix); yields
    (settings, bus recorder); stops the daemon and checks it is gone."""
    settings = {
        **default_settings(), "kolla_state_directory": str(health_dir / "state"), "container_name_prefix": health_prefix,
        "health_check_interval": INTERVAL, "health_failure_threshold": THRESHOLD,
        "health_restart_cap": 2, "health_restart_window": 600, "health_restart_backoff": 1,
        "health_stop_timeout": STOP_TIMEOUT,
    }
    started = healthloop.ensure_health_daemon(settings)
    assert started["started"] and started["pid"]
    again = healthloop.ensure_health_daemon(settings)
    assert again == {**started, "started": False}, "a running daemon with the same config is kept"
    recorder = healthloop.EventTap(settings)
    yield settings, recorder
    recorder.close()
    root = healthloop.daemon_root(settings)
    assert healthloop.stop_health_daemon(settings) == started["pid"]
    wait_until(lambda: not salt_minion_processes(root), 20, what="the daemon's processes ending")


def test_frozen_memcached_is_restarted_and_healthy_again(health_daemon, health_manager, health_prefix, docker_client):
    settings, bus = health_daemon
    spec = memcached_spec(f"{health_prefix}memcached")
    health_manager.ensure(spec)
    container = docker_client.containers.get(spec.name)
    before = incarnation(container)

    freeze_service(container)
    frozen_at = time.monotonic()
    assert not passes_check(container, spec)
    wait_until(lambda: incarnation(container)[0] != before[0] and passes_check(container, spec),
               RECOVERY_BOUND, what="memcached restarted and healthy")
    recovered_in = time.monotonic() - frozen_at
    print(f"frozen memcached healthy again after {recovered_in:.1f} s (bound {RECOVERY_BOUND} s)")

    wait_until(lambda: bus.tags(f"{spec.name}/healthy"), 10, what="the beacon's healthy event")
    assert bus.tags(f"kolla/health/{spec.name}/restarted") == [f"kolla/health/{spec.name}/restarted"]
    assert bus.tags(f"{spec.name}/unhealthy"), "the beacon reported it"
    assert not bus.tags("gave-up")


def test_a_container_that_keeps_failing_is_restarted_cap_times_then_left_alone(
        health_daemon, health_manager, health_prefix, docker_client):
    settings, bus = health_daemon
    spec = memcached_spec(f"{health_prefix}broken", breakable=True)
    health_manager.ensure(spec)
    neighbour_spec = memcached_spec(f"{health_prefix}neighbour")
    health_manager.ensure(neighbour_spec)
    container = docker_client.containers.get(spec.name)
    neighbour = docker_client.containers.get(neighbour_spec.name)
    neighbour_before = incarnation(neighbour)

    assert container.exec_run(["touch", BROKEN_MARKER]).exit_code == 0
    cap = settings["health_restart_cap"]
    gave_up = wait_until(lambda: bus.tags(f"kolla/health/{spec.name}/gave-up"), 60, what="the gave-up event")
    assert gave_up == [f"kolla/health/{spec.name}/gave-up"]
    assert len(bus.tags(f"kolla/health/{spec.name}/restarted")) == cap
    left = incarnation(container)

    # Left alone: still running, not restarted again, while the beacon keeps
    # (at doubling gaps) reminding that it is unhealthy.
    gave_up_at = bus.first(f"kolla/health/{spec.name}/gave-up")
    time.sleep(8)
    assert bus.tags(f"{spec.name}/unhealthy", since=gave_up_at), "the beacon kept reminding"
    assert incarnation(container) == left and container.status == "running"
    assert len(bus.tags(f"kolla/health/{spec.name}/restarted")) == cap
    assert bus.tags(f"kolla/health/{spec.name}/gave-up") == gave_up, "the give-up is announced once"
    record = healthloop.ledger(settings).read()[spec.name]
    assert record["gave_up"].endswith(left[0]) and len(record["restarts"]) == cap
    assert incarnation(neighbour) == neighbour_before, "the healthy neighbour was not touched"

