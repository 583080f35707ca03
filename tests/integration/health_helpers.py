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

from kolla_salt.containers.manager import ContainerManager
from kolla_salt.containers.spec import ContainerSpec
from kolla_salt.declaration.settings import default_image

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


# SIGSTOP every process whose command line holds argv[1], but PID 1 (tini) and itself.
# Services started on their own (own network namespace, loopback only), with the
# check of their deployed definition: the health tests and benchmarks/health_recovery.py.
STANDALONE = {
    "memcached": dict(
        image=default_image("memcached"), process="memcached", user=None,
        command=["/usr/bin/memcached", "-u", "memcache", "-l", "127.0.0.1", "-p", "11211", "-m", "16"],
        test=["kolla_check", "memcached", "127.0.0.1:11211"]),
    "keystone": dict(
        # keystone under uwsgi serving its version document: fernet keys made at
        # the first start (a deployment's are on a volume: a restart does not
        # make them again), no database, which /v3 does not need.
        image=default_image("keystone"), process="uWSGI", user="keystone",
        command=["sh", "-c", "test -e /etc/keystone/fernet-keys/0 || keystone-manage fernet_setup"
                             " --keystone-user keystone --keystone-group keystone;"
                             " exec kolla_keystone_serve 127.0.0.1 5000"],
        test=["kolla_check", "http-unix", "/var/lib/keystone/uwsgi.sock", "/v3", "200"]),
}


def deployed_check(service):
    """The healthcheck of the service's own definition (salt/states/kolla/<service>/service.yaml),
    rendered as a deploy renders it (placeholder passwords: only the check is read)."""
    from kolla_salt.declaration.hostfacts import host_facts
    from kolla_salt.declaration.rendering import ServiceRenderer
    from kolla_salt.declaration.settings import default_settings, wanted_passwords
    passwords = {key: "test" for key in wanted_passwords()}
    settings = default_settings()
    renderer = ServiceRenderer(settings, passwords, host_facts(settings, "127.0.0.1"))
    return renderer.definition(service)["containers"][service]["healthcheck"]


def standalone_spec(name, service, **check):
    """A spec of STANDALONE[service] whose check has the deployed definition's
    timings (interval, timeout, start period), changed by `check`."""
    found = STANDALONE[service]
    timings = {k: v for k, v in deployed_check(service).items() if k != "test"}
    return ContainerSpec.from_dict({
        "name": name, "image": found["image"], "set_path": "test/health", "user": found["user"],
        "command": found["command"], "stop_timeout": 2,
        "healthcheck": {"test": found["test"], **timings, **check},
    }, where=f"standalone spec {name}")


@contextlib.contextmanager
def host_load(seconds, folder, busy_per_cpu=1, writers=1):
    """Saturates the host for at most `seconds`: `busy_per_cpu` busy loops per
    CPU and `writers` writers of 256 MiB files with fsync, each bounded by
    `timeout`, ended by PID on exit."""
    import os
    targets = [Path(folder) / f"kshealth-load{i}.bin" for i in range(writers)]
    procs = [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"])
             for _ in range(busy_per_cpu * os.cpu_count())]
    procs += [subprocess.Popen(["timeout", str(seconds), "sh", "-c",
                                f"while :; do dd if=/dev/zero of={target} bs=1M count=256 conv=fsync status=none; "
                                f"rm -f {target}; done"]) for target in targets]
    try:
        yield procs
    finally:
        for proc in procs:   # `timeout` passes SIGTERM on to its child
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in procs:
            proc.wait(10)
        for target in targets:
            target.unlink(missing_ok=True)


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
