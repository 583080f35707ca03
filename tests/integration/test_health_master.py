"""The same beacon, reactor and module with a real salt-master and minion
(pytest-salt-factories): the multinode shape. The minion's beacon and the
restart policy come from pillar, built from globals.yml like everything
else. The minion's beacon events reach the master as `salt/beacon/<minion>/kolla_health/<name>/unhealthy`, the
master's reactor (salt/reactor/kolla_health/master.sls) runs
`kolla_health.restart` on that minion, and the module's announcements
(`kolla/health/<name>/restarted|gave-up`) come back to the master's bus."""
import time

import pytest

from kolla_salt import paths
from kolla_salt.containers.engine import passes_check

from health_helpers import BROKEN_MARKER, incarnation, memcached_spec, wait_until
from probes import freeze_service
from health_helpers import health_dir, health_manager, health_prefix  # noqa: F401 (fixtures)
from salt_master import master_and_minion

pytestmark = pytest.mark.integration

CAP = 2


@pytest.fixture
def salt_pair(salt_factories, health_prefix, health_dir):
    """A master with the kolla_health reaction whose pillar (pillar/kolla.sls over
    an operator folder) gives the minion its beacon and restart policy, watching
    only this test's containers."""
    from conftest import KollaEnv
    (health_dir / "operator").mkdir()
    operator = KollaEnv(health_dir / "operator", health_prefix)
    operator.write_globals(
        enable_memcached=False, enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False,
        enable_health_loop=True, kolla_state_directory=str(health_dir / "state"),
        health_check_interval=1, health_failure_threshold=2, health_restart_cap=CAP,
        health_restart_backoff=1, health_stop_timeout=2)
    reaction = {"salt/beacon/*/kolla_health/*/unhealthy": [
        str(paths.REPO / "salt" / "reactor" / "kolla_health" / "master.sls")]}
    with master_and_minion(salt_factories, "kshealth", operator.config_dir, {"reactor": [reaction]}) as pair:
        yield pair


def test_master_reactor_restarts_a_frozen_container_then_gives_up_on_a_broken_one(
        salt_pair, event_listener, health_manager, health_prefix, docker_client):
    master, minion = salt_pair
    frozen_spec = memcached_spec(f"{health_prefix}memcached")
    broken_spec = memcached_spec(f"{health_prefix}broken", breakable=True)
    steady_spec = memcached_spec(f"{health_prefix}steady")
    for spec in (frozen_spec, broken_spec, steady_spec):
        health_manager.ensure(spec)
    frozen, broken, steady = (docker_client.containers.get(s.name) for s in (frozen_spec, broken_spec, steady_spec))
    frozen_before, steady_before = incarnation(frozen), incarnation(steady)
    start = time.time()

    # (a) a hung service is restarted through the master and comes back
    freeze_service(frozen)
    wait_until(lambda: incarnation(frozen)[0] != frozen_before[0] and passes_check(frozen, frozen_spec),
               30, what="frozen memcached restarted and healthy")
    matched = event_listener.wait_for_events([
        (master.id, f"salt/beacon/{minion.id}/kolla_health/{frozen_spec.name}/unhealthy"),
        (master.id, f"kolla/health/{frozen_spec.name}/restarted"),
        (master.id, f"salt/beacon/{minion.id}/kolla_health/{frozen_spec.name}/healthy"),
    ], timeout=20, after_time=start)
    assert matched.found_all_events, f"missing: {matched.missed}"

    # (b) a fault that survives restarts: CAP restarts, then one gave-up, then left alone
    assert broken.exec_run(["touch", BROKEN_MARKER]).exit_code == 0
    matched = event_listener.wait_for_events(
        [(master.id, f"kolla/health/{broken_spec.name}/gave-up")], timeout=60, after_time=start)
    assert matched.found_all_events, f"missing: {matched.missed}"
    left = incarnation(broken)
    time.sleep(6)
    assert incarnation(broken) == left
    restarts = event_listener.get_events([(master.id, f"kolla/health/{broken_spec.name}/restarted")],
                                         after_time=start)
    assert len(restarts) == CAP
    assert len(event_listener.get_events([(master.id, f"kolla/health/{broken_spec.name}/gave-up")],
                                         after_time=start)) == 1

    # (c) the healthy one was never touched
    assert incarnation(steady) == steady_before
    # (a loaded host may make its check slow: reported as such, never restarted)
    assert not event_listener.get_events([(master.id, f"*{steady_spec.name}/unhealthy")], after_time=start)
    assert not event_listener.get_events([(master.id, f"kolla/health/{steady_spec.name}/*")], after_time=start)
