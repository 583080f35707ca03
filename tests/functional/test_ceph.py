"""Ceph on one host (salt/states/kolla/ceph): a monitor, a manager and one OSD whose
BlueStore is a file, deployed alone by `kolla-salt deploy`. What a user notices: the
cluster says HEALTH_OK, kolla-ansible's four pools exist with one copy each, the
services' cephx users hold the caps they are given (cinder writes a volume, glance may
not), and a volume written with a known pattern reads back the same, also after every
Ceph container was replaced by a redeploy with a changed setting."""
import hashlib
import random
import subprocess
import time

import pytest

from kolla_salt.declaration.settings import default_settings

pytestmark = pytest.mark.functional

DEFAULTS = default_settings()
POOLS = [DEFAULTS[f"ceph_{name}_pool_name"] for name in ("glance", "cinder", "nova", "cinder_backup")]
CONTAINERS = ("ceph_mon", "ceph_mgr", "ceph_osd")
ONLY_CEPH = {"enable_mariadb": False, "enable_rabbitmq": False, "enable_keystone": False,
             "enable_memcached": False, "enable_ceph": True,
             # The monitor warns when its filesystem has less than 30 % free (Ceph's
             # default); the test is of Ceph, not of how full this machine's disk is.
             "ceph_mon_data_avail_warn": 5}
IMAGE = "volumes/kst-ceph-volume"   # an RBD image in cinder's pool


def ceph(docker_client, env, *args, user="admin"):
    """A Ceph CLI command (`ceph`, `rbd`, `rados`) in the monitor's container as client.USER."""
    result = docker_client.containers.get(env.name("ceph_mon")).exec_run([args[0], "--id", user, *args[1:]])
    return result.exit_code, result.output.decode()


def health_ok_within(docker_client, env, seconds):
    """Seconds until `ceph health` says HEALTH_OK (it is asserted within `seconds`)."""
    began = time.monotonic()
    said = ""
    while time.monotonic() - began < seconds:
        _, said = ceph(docker_client, env, "ceph", "health", "detail")
        if said.startswith("HEALTH_OK"):
            return time.monotonic() - began
        time.sleep(2)
    raise AssertionError(f"no HEALTH_OK within {seconds} s: {said}")


def rbd_export_sha256(env, user):
    """The SHA-256 of the RBD image as `rbd export` streams it out (read by client.USER)."""
    out = subprocess.run(["docker", "exec", env.name("ceph_mon"), "rbd", "--id", user, "export", IMAGE, "-"],
                         capture_output=True, timeout=120, check=True).stdout
    return hashlib.sha256(out).hexdigest()


def memory_at_rest(env):
    """`docker stats`' memory and CPU of the three containers, as printed."""
    return subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}} CPU {{.CPUPerc}}",
                           *(env.name(c) for c in CONTAINERS)], capture_output=True, text=True, timeout=60).stdout


def test_ceph_on_one_host_is_healthy_serves_rbd_and_keeps_data_across_a_redeploy(kolla_env, built_images,
                                                                                 docker_client):
    env = kolla_env
    built_images("ceph")
    # Its value rule names the file and the key, before anything is deployed.
    env.write_globals(**ONLY_CEPH, ceph_osd_file_size_gb=2)
    proc = env.run("validate", check=False)
    assert (f"{env.config_dir / 'globals.yml'}: key 'ceph_osd_file_size_gb' must be at least 4 GiB, got 2"
            in proc.stderr), proc.stdout + proc.stderr
    env.write_globals(ceph_osd_file_size_gb=None)

    began = time.monotonic()
    out = env.run("deploy").stdout
    deployed = time.monotonic() - began
    for container in CONTAINERS:
        assert f"{env.name(container)} created, generation 1 is healthy" in out, out
        assert docker_client.containers.get(env.name(container)).labels["kolla.set"] == "storage-control/ceph"
    healthy = health_ok_within(docker_client, env, 120)
    print(f"\nceph deploy (bootstrap, mon, mgr, osd, pools): {deployed:.1f} s, HEALTH_OK {healthy:.1f} s later")

    # kolla-ansible's pools, one copy each on one host (ceph_pool_size), for rbd.
    code, listed = ceph(docker_client, env, "ceph", "osd", "pool", "ls")
    assert code == 0 and set(POOLS) <= set(listed.split()), listed
    for pool in POOLS:
        assert ceph(docker_client, env, "ceph", "osd", "pool", "get", pool, "size")[1].strip() == "size: 1", pool
        assert '"rbd"' in ceph(docker_client, env, "ceph", "osd", "pool", "application", "get", pool)[1], pool
    # The services' users, their keyrings kept 0600 beside the admin's.
    code, caps = ceph(docker_client, env, "ceph", "auth", "get", "client.glance")
    assert code == 0 and 'caps osd = "profile rbd pool=images"' in caps, caps
    modes = docker_client.containers.get(env.name("ceph_mon")).exec_run(
        ["sh", "-c", "stat -c '%a %U %n' /var/lib/ceph/keys/*"]).output.decode().splitlines()
    assert len(modes) >= 8 and all(line.startswith("600 ceph ") for line in modes), modes

    # A volume written by cinder's user with a known pattern reads back the same.
    pattern = random.Random(68).randbytes(16 << 20)
    expected = hashlib.sha256(pattern).hexdigest()
    subprocess.run(["docker", "exec", "-i", env.name("ceph_mon"), "rbd", "--id", "cinder", "import", "-", IMAGE],
                   input=pattern, capture_output=True, timeout=120, check=True)
    assert rbd_export_sha256(env, "cinder") == expected
    # glance's user reads images only: it may not write in cinder's pool.
    code, said = ceph(docker_client, env, "rbd", "create", "--size", "1", "volumes/kst-glance-may-not", user="glance")
    assert code != 0, said
    time.sleep(10)   # the manager's modules settle after their first rounds
    at_rest = memory_at_rest(env)
    print("ceph's memory at rest:\n" + at_rest.strip())

    # A changed setting (the OSD's memory target, in the ceph.conf of all three) replaces
    # every Ceph container; the volume reads back the same, the cluster is healthy again.
    began = time.monotonic()
    env.write_globals(ceph_osd_memory_target_mb=1100)
    out = env.run("deploy").stdout
    redeployed = time.monotonic() - began
    for container in CONTAINERS:
        assert f"{env.name(container)} recreated, generation 2 is healthy" in out, out
    code, target = ceph(docker_client, env, "ceph", "config", "show", "osd.0", "osd_memory_target")
    assert target.strip() == str(1100 << 20), target
    healthy = health_ok_within(docker_client, env, 120)
    assert rbd_export_sha256(env, "cinder") == expected
    print(f"redeploy replacing mon, mgr and osd: {redeployed:.1f} s, HEALTH_OK {healthy:.1f} s later; "
          f"the 16 MiB volume read back with the same SHA-256")
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout
