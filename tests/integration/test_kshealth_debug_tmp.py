"""The same beacon, reactor and module with a real salt-master and minion
(pytest-salt-factories): the multinode shape. The minion's beacon events
reach the master as `salt/beacon/<minion>/kolla_health/<name>/unhealthy`, the
master's reactor (salt/reactor/kolla_health/master.sls) runs
`kolla_health.restart` on that minion, and the module's announcements
(`kolla/health/<name>/restarted|gave-up`) come back to the master's bus."""
import time
import uuid

import pytest

from kolla_salt import paths

from conftest import BROKEN_MARKER, check_passes, freeze_service, incarnation, memcached_spec, wait_until

pytestmark = pytest.mark.integration

CAP = 2


@pytest.fixture
def salt_pair(salt_factories, health_prefix, health_dir):
    """A master with the kolla_health reaction and a minion with the beacon
    watching only this test's containers."""
    master = salt_factories.salt_master_daemon(f"kshealth-master-{uuid.uuid4().hex[:6]}", overrides={
        "reactor": [{"salt/beacon/*/kolla_health/*/unhealthy": [
            str(paths.REPO / "salt" / "reactor" / "kolla_health" / "master.sls")]}],
    })
    minion = master.salt_minion_daemon(f"kshealth-minion-{uuid.uuid4().hex[:6]}", overrides={
        "module_dirs": [str(paths.REPO / "salt" / "_modules")],
        "beacons_dirs": [str(paths.REPO / "salt" / "_beacons")],
        "beacons": {"kolla_health": [{"interval": 1}, {"threshold": 2}, {"prefix": health_prefix},
                                     {"remind": 1}, {"remind_max": 600}]},
        "kolla_health": {"state_file": str(health_dir / "restarts.json"), "restart_cap": CAP,
                         "restart_window": 600, "restart_backoff": 1, "stop_timeout": 2, "prefix": health_prefix},
    })
    with master.started(), minion.started():
        yield master, minion


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

    import subprocess
    try:
        _body(master, minion, frozen, frozen_spec, frozen_before)
    finally:
        for e in sorted(event_listener.store, key=lambda e: e.received)[-40:]: print("EV", e.daemon_id, e.tag, str(e.data)[:200])
        print(subprocess.run(["grep", "-iE", "kolla|reactor|error|beacon", master.config["log_file"]], capture_output=True, text=True).stdout[-6000:])
        print(subprocess.run(["grep", "-iE", "kolla|error|beacon|Traceback", minion.config["log_file"]], capture_output=True, text=True).stdout[-6000:])

def _body(master, minion, frozen, frozen_spec, frozen_before):
    # (a) a hung service is restarted through the master and comes back
    freeze_service(frozen)
    wait_until(lambda: incarnation(frozen)[0] != frozen_before[0] and check_passes(frozen, frozen_spec),
               30, what="frozen memcached restarted and healthy")
    matched = event_listener.wait_for_events([
        (master.id, f"salt/beacon/{minion.id}/kolla_health/{frozen_spec.name}/unhealthy"),
        (master.id, f"kolla/health/{frozen_spec.name}/restarted"),
        (master.id, f"salt/beacon/{minion.id}/kolla_health/{frozen_spec.name}/healthy"),
    ], timeout=20, after_time=start)
