"""A real salt-master and one minion (pytest-salt-factories) serving this
checkout: the master serves its states, runners and pillar (pillar/kolla.sls over
an operator folder) as kolla-salt's own master does, the minion loads the checkout's
execution, state and beacon modules. Used by the integration tests and by the
cloud's compute upgrade through `state.orchestrate` (tests/functional/test_cloud.py)."""
import contextlib
import shutil
import uuid

from kolla_salt import paths
from kolla_salt.roads.node import served_from_checkout


@contextlib.contextmanager
def master_and_minion(salt_factories, name, config_dir, master_overrides=None):
    suffix = uuid.uuid4().hex[:6]
    master = salt_factories.salt_master_daemon(f"{name}-master-{suffix}", overrides={
        **served_from_checkout(config_dir), **(master_overrides or {})})
    minion = master.salt_minion_daemon(f"{name}-minion-{suffix}", overrides={
        # Salt runs beacons every second but counts their `interval` in
        # loop_interval units (salt-factories sets 0.05): keep Salt's default.
        "loop_interval": 1,
        "module_dirs": [str(paths.REPO / "salt" / "_modules")],
        "states_dirs": [str(paths.REPO / "salt" / "_states")],
        "beacons_dirs": [str(paths.REPO / "salt" / "_beacons")],
    })
    try:
        with master.started(), minion.started():
            yield master, minion
    finally:
        for daemon in (minion, master):   # salt-factories leaves their folders in /tmp
            shutil.rmtree(daemon.config["root_dir"], ignore_errors=True)
