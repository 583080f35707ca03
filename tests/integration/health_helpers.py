"""Fixtures and helpers of the health loop tests (fixture names start with
`health_`). Not a conftest.py: several test folders importing `conftest`
by name would shadow each other (tests/functional imports the root one), so
the test modules import these explicitly.

Every container is named `kshealth<random>-...` and every folder lives in a
short temporary directory (Unix socket paths of the daemons must stay short);
both are removed afterwards, so these tests run beside a real deployment."""
import contextlib
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker.errors
import pytest

from kolla_salt.containers import ContainerManager
from kolla_salt.inventory import default_image
from kolla_salt.spec import ContainerSpec

MEMCACHED_IMAGE = default_image("memcached")
BROKEN_MARKER = "/tmp/kshealth-broken"
CHECK_TIMEOUT = 2   # seconds: memcached_spec's check


@pytest.fixture
def health_prefix():
    return f"kshealth{uuid.uuid4().hex[:6]}-"


@pytest.fixture
def health_dir():
    path = Path(tempfile.mkdtemp(prefix="kshealth", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def health_manager(docker_client, built_images, health_prefix, health_dir):
    """A ContainerManager over a test state folder; removes the test's containers after."""
    built_images("memcached")
    yield ContainerManager(client=docker_client, state_dir=health_dir / "state", health_timeout=60)
    remove_prefixed(docker_client, health_prefix)


def remove_prefixed(client, prefix, attempts=5):
    """Removes every container named `prefix...`, through the raw listing
    (other containers on the engine may vanish meanwhile), until none is left."""
    for _ in range(attempts):
        left = [entry for entry in client.api.containers(all=True, filters={"name": prefix})
                if any(name.lstrip("/").startswith(prefix) for name in entry["Names"])]
        if not left:
            return
        for entry in left:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(entry["Id"], force=True)
        time.sleep(0.5)
    raise AssertionError(f"containers {prefix}* could not be removed: {[e['Names'] for e in left]}")


def memcached_spec(name, breakable=False):
    """memcached in its own network namespace (its loopback only), with a fast
    check. `breakable`: the check also fails while BROKEN_MARKER exists in the
    container, a fault that survives every restart (the writable layer stays)."""
    check = ["kolla_check", "memcached", "127.0.0.1:11211"]
    if breakable:
        check = ["sh", "-c", f"test ! -e {BROKEN_MARKER} && exec {' '.join(check)}"]
    return ContainerSpec.from_dict({
        "name": name, "image": MEMCACHED_IMAGE, "set_path": "test/health",
        "command": ["/usr/bin/memcached", "-u", "memcache", "-l", "127.0.0.1", "-p", "11211", "-m", "16"],
        "healthcheck": {"test": check, "interval": 1, "timeout": CHECK_TIMEOUT, "retries": 2, "start_period": 1},
        "stop_timeout": 2,
    }, where=f"test spec {name}")


def freeze_service(container, process="memcached"):
    """SIGSTOP the service inside (PID 1, tini, and the check keep working):
    the process is alive, the check fails, Docker does nothing."""
    result = container.exec_run(["sh", "-c", f"kill -STOP $(pidof {process})"])
    assert result.exit_code == 0, result.output


def incarnation(container):
    container.reload()
    return container.attrs["State"]["StartedAt"], container.attrs["RestartCount"]


def wait_until(predicate, timeout, step=0.25, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"{what} not reached within {timeout} s")


def salt_minion_processes(config_dir):
    """PIDs of salt-minion processes started with `-c config_dir`."""
    out = subprocess.run(["pgrep", "-f", f"salt-minion -c {config_dir} "], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]
