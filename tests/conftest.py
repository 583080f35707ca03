"""Shared fixtures. Tests never touch a real deployment: every container,
volume and folder they create carries a per-run prefix, and services listen on
loopback ports of their own."""
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

import guest
import tempest
from kolla_salt.declaration.settings import default_ports

REPO = Path(__file__).resolve().parent.parent
KOLLA = str(Path(sys.executable).parent / "kolla-salt")

# Every port setting of the service folders (kolla_salt.declaration.settings.default_ports)
# moved far from the defaults, so a deployment on this host never collides, and below
# 32768: a port in Linux's ephemeral range (32768-60999) may be held for a moment by
# some outgoing connection, and a server's bind to it then fails. Another rule than
# benchmarks/common.py's, so a benchmark's cloud and a test's never meet either.
TEST_PORTS = {key: port + 21000 if port < 11768 else port - 1000 for key, port in default_ports().items()}
assert len(set(TEST_PORTS.values())) == len(TEST_PORTS) and not set(TEST_PORTS.values()) & set(
    default_ports().values()), TEST_PORTS
# One process per API and RPC service, as kolla-ansible's CI runs: each process loads
# the whole service, and the suite's clouds share this machine's cores. nova-compute
# waits 2 s instead of 10 for requests in progress when it stops: the suite's servers
# are never mid-spawn then, and each of its swaps spent the whole wait. Docker checks
# every container every 30 s (60 by default), and the health loop checks one itself
# only when Docker has not passed it for as long: a check costs 40-150 ms of CPU with
# Docker's share, and at 10 s the lab's 50 containers kept a quarter of the machine
# busy (docs/design.md, "The suite's time"). The tests that read `docker ps`'s verdict
# of a new container wait for its first check (docker_verdict). A stopped process, a
# failing check and a restart are still seen each second; the health tests set their
# own pace.
SUITE_SETTINGS = {"openstack_service_workers": 1, "nova_compute_shutdown_timeout": 2, "health_check_interval": 30,
                  "health_docker_interval": 30}
# Images of another namespace than the default (kolla-salt): a checkout whose images
# differ from another's on the same engine (a branch under work) builds and tests its own.
IMAGE_NAMESPACE = os.environ.get("KOLLA_SALT_TEST_NAMESPACE", "")
IMAGES = IMAGE_NAMESPACE or "kolla-salt"   # the namespace of the images tests run and name


@pytest.fixture(scope="session")
def docker_client():
    docker = pytest.importorskip("docker")
    return docker.from_env(timeout=600)


class KollaEnv:
    """An operator folder plus host folders of one test, and the CLI over them."""

    def __init__(self, root, prefix):
        self.root = root
        self.prefix = prefix
        self.config_dir = root / "config"
        self.config_dir.mkdir()
        self.globals = {
            "container_name_prefix": prefix,
            "node_config_directory": str(root / "etc"),
            "kolla_state_directory": str(root / "state"),
            "kolla_log_directory": str(root / "log"),
            "enable_health_loop": False,   # the suites that test the loop turn it on
            "enable_cron": False,          # likewise log rotation
            "enable_glance": False,        # and the cloud beyond keystone (tests/functional/test_cloud.py)
            "enable_placement": False,
            "enable_haproxy": False,       # tests/functional/test_cloud.py puts the cloud behind it
            **({"docker_namespace": IMAGE_NAMESPACE} if IMAGE_NAMESPACE else {}),
            **TEST_PORTS,
            **SUITE_SETTINGS,
        }
        self.write_globals()
        self.run("genpwd")

    def write_globals(self, **changes):
        """globals.yml with `changes` (a key given None goes), on top of what it declares
        now: commands record their decisions there too (`upgrade --release` its release)."""
        path = self.config_dir / "globals.yml"
        if path.exists():
            self.globals = yaml.safe_load(path.read_text())
        self.globals.update(changes)
        self.globals = {key: value for key, value in self.globals.items() if value is not None}
        path.write_text(yaml.safe_dump(self.globals))

    def run(self, *args, check=True):
        proc = subprocess.run([KOLLA, "--config-dir", str(self.config_dir), *args],
                              capture_output=True, text=True, timeout=1800)
        if check and proc.returncode != 0:
            raise AssertionError(f"kolla-salt {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def openstack(self, *args, values=True):
        """The real python-openstackclient, as the admin of this cloud (tests/guest.py)."""
        return guest.openstack(self.config_dir, *args, values=values)

    def passwords(self):
        return yaml.safe_load((self.config_dir / "passwords.yml").read_text())

    def name(self, container):
        return self.prefix + container

    def cleanup(self, client):
        """Ends this env's health daemon (by its pid file) and removes its containers and volumes."""
        from kolla_salt.healing import healthloop
        healthloop.stop_health_daemon(self.globals)
        cleanup_prefix(client, self.prefix)


def cleanup_prefix(client, prefix):
    """Removes every container, then every volume, whose name starts with prefix,
    then the images its tests made (labelled kolla.test=<prefix without its dash>;
    untagged while a container still ran them, they would stay behind as dangling).
    prefix may be a tuple of prefixes (as str.startswith takes).
    One removal that fails (the engine busy) does not stop the others: a container
    left running would hold its test ports for every test after it. A second pass
    retries what failed; what still fails is raised, naming it."""
    import docker.errors
    labels = tuple(p.rstrip("-") for p in ((prefix,) if isinstance(prefix, str) else prefix))
    failed = {}
    for _ in range(2):
        failed = {}
        for kind in (client.containers.list(all=True), client.volumes.list()):
            for item in kind:
                if item.name.startswith(prefix):
                    try:
                        item.remove(force=True)
                    except docker.errors.NotFound:
                        pass
                    except docker.errors.DockerException as error:
                        failed[item.name] = error
        for image in client.images.list(filters={"label": "kolla.test"}):
            if not image.labels["kolla.test"].startswith(labels):
                continue
            try:
                client.images.remove(image.id, force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.DockerException as error:
                failed[image.short_id] = error
        if not failed:
            return
        time.sleep(2)
    raise RuntimeError(f"could not remove {', '.join(sorted(failed))}: {failed}")


def plug_test_host(namespace, address, mac=None):
    """A test host: a network namespace whose eth0 (`address`/24, `mac` if given) is
    one end of a veth pair; the other end, `<namespace>0`, stays on this host to be
    plugged into a bridge. `unplug_test_host` removes both."""
    unplug_test_host(namespace)   # an interrupted run's
    for step in (["ip", "netns", "add", namespace],
                 ["ip", "link", "add", f"{namespace}0", "type", "veth", "peer", "name", "eth0", "netns", namespace],
                 ["ip", "link", "set", f"{namespace}0", "up"],
                 *([["ip", "-n", namespace, "link", "set", "eth0", "address", mac]] if mac else []),
                 ["ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0"],
                 ["ip", "-n", namespace, "link", "set", "eth0", "up"]):
        proc = subprocess.run(step, capture_output=True, text=True)
        assert proc.returncode == 0, (step, proc.stderr)


def unplug_test_host(namespace):
    """Removes a test host and its veth pair. The pair goes with its host-side end
    (deleting only the namespace leaves it while the kernel tears the namespace down,
    or for good where something still holds the namespace), so wait until it is gone."""
    subprocess.run(["ip", "link", "del", f"{namespace}0"], capture_output=True)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
    for _ in range(100):
        if subprocess.run(["ip", "link", "show", f"{namespace}0"], capture_output=True).returncode:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the veth {namespace}0 of test host {namespace} is still there after 10 s")


def qemu_pid(domain):
    """The host's pid of a libvirt guest's qemu process (its command line names the
    domain: `-name guest=<domain>,...`), or None."""
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and f"guest={domain},".encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                return int(entry)
        except OSError:   # ended meanwhile
            continue
    return None


def while_sampling(run, count):
    """Calls `run()` (in a thread) while sampling `count()` (something a working guest
    keeps increasing: its console lines, answered pings): (what run returned, the
    longest time without an increase)."""
    outcome = {}

    def target():
        try:
            outcome["value"] = run()
        except BaseException as error:   # raised again in the test's thread
            outcome["error"] = error
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    last_count, last_change, longest = count(), time.monotonic(), 0.0
    while thread.is_alive():
        now, current = time.monotonic(), count()
        if current != last_count:
            longest, last_count, last_change = max(longest, now - last_change), current, now
        time.sleep(0.2)
    longest = max(longest, time.monotonic() - last_change)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"], longest


class EngineEvents:
    """The engine's container events from its start to its `stop()` (a thread streams
    them: the engine answers a later `since` query from its last 256 events only)."""

    def __init__(self, client):
        self.events = []
        self._stream = client.events(decode=True, filters={"type": "container"})
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            for event in self._stream:
                self.events.append(event)
        except Exception:   # the stream closed by stop()
            pass

    def stop(self):
        time.sleep(0.5)   # the last events of a command that just ended
        self._stream.close()
        self._thread.join(timeout=10)
        return self

    def first(self, action, name_prefix, exit_code=None):
        """When (ns) the first `action` happened to a container whose name starts with
        `name_prefix` (and ended with `exit_code`: exec_die), or None."""
        times = [e["timeNano"] for e in self.events if e["Action"] == action
                 and e["Actor"]["Attributes"].get("name", "").startswith(name_prefix)
                 and (exit_code is None or e["Actor"]["Attributes"].get("exitCode") == str(exit_code))]
        return min(times, default=None)


def while_running(env, command, count):
    """Runs kolla-salt `command` while sampling `count()` (while_sampling): (the
    command's output, the longest time without an increase). Each line is printed as
    it comes, stamped with time.monotonic() (the clock of probes.Prober's failures):
    a failed test's output shows what the command was doing when a request failed."""
    def run():
        proc = subprocess.Popen([KOLLA, "--config-dir", str(env.config_dir), *command], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            print(f"[{time.monotonic():.1f}] {line}", end="")
        return proc.wait(), "".join(lines)
    (returncode, out), longest = while_sampling(run, count)
    assert returncode == 0, out
    return out, longest


def docker_verdict(container, seconds=SUITE_SETTINGS["health_docker_interval"] + 30):
    """Docker's own verdict of `container` (healthy, unhealthy), once its first check
    has run: that comes `health_docker_interval` after the container's start."""
    deadline = time.monotonic() + seconds
    while container.health == "starting" and time.monotonic() < deadline:
        time.sleep(1)
        container.reload()
    return container.health


# Every container and volume the tests make starts with one of these (health_helpers: kshealth).
TEST_NAMES = ("kst", "kshealth")
LAB_NAME, LAB_HOSTS = "kstlab", 3   # the lab of tests/integration/test_lab.py


@pytest.fixture(scope="session", autouse=True)
def leftovers_of_an_interrupted_run_removed(request):
    """A run killed half-way (a stopped engine, a timeout) leaves its test containers
    behind; restarted with the engine, they would hold the test ports. Only one suite
    runs at a time (scripts/run-tests.sh holds a lock), so any test container now is
    such a leftover. So is the suite's lab, with the images it tagged for its registry
    on this engine (`lab down` removes them): the tests before the lab's would read
    those tags. Unit tests need no engine: nothing is looked at without one."""
    if all("tests/unit" in str(item.path) for item in request.session.items):
        return
    from kolla_salt.lab.namespaces import DATA_ROOT, RUN_ROOT
    if (DATA_ROOT / LAB_NAME).exists() or (RUN_ROOT / LAB_NAME).exists():
        print(f"\nremoving the lab an interrupted test run left: {LAB_NAME}")
        subprocess.run([KOLLA, "lab", "down", "--name", LAB_NAME, "--hosts", str(LAB_HOSTS)], capture_output=True,
                       timeout=600)
    import docker
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException:
        return
    left = [c.name for c in client.containers.list(all=True) if c.name.startswith(TEST_NAMES)]
    if left:
        print(f"\nremoving containers an interrupted test run left: {', '.join(sorted(left))}")
    cleanup_prefix(client, TEST_NAMES)   # str.startswith takes the tuple


@pytest.fixture(scope="session", autouse=True)
def salt_logging_flushed_in_time():
    """Salt keeps early log records in a deferred handler bound to the stderr pytest
    captured, and flushes them at exit into that closed stream ("--- Logging error ---"
    after the summary): hand them to the live handlers while the session still runs."""
    yield
    impl = sys.modules.get("salt._logging.impl")
    if impl is not None:
        impl.shutdown_temp_handler()


@pytest.fixture(scope="session")
def salt_factories_config():
    """The tests' salt-masters and minions (pytest-salt-factories) end by SIGKILL: on
    SIGTERM a salt-minion sleeps a fixed 5 s for returns still due to its master
    (kolla_salt.healing.healthloop.stop_health_daemon), and these hold nothing to keep."""
    return {"slow_stop": False}


@pytest.fixture
def kolla_env(tmp_path, docker_client):
    prefix = f"kst{uuid.uuid4().hex[:6]}-"
    env = KollaEnv(tmp_path, prefix)
    yield env
    env.cleanup(docker_client)


@pytest.fixture(scope="session")
def built_images(tmp_path_factory):
    """Builds every image once per session (unchanged images are skipped)."""
    config_dir = "/nonexistent"
    if IMAGE_NAMESPACE:
        config_dir = tmp_path_factory.mktemp("build")
        (config_dir / "globals.yml").write_text(yaml.safe_dump({"docker_namespace": IMAGE_NAMESPACE}))

    def build(*images):
        proc = subprocess.run([KOLLA, "--config-dir", str(config_dir), "build", *images],
                              capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return build


def pytest_collection_finish(session):
    """tempest's virtualenv is made while the tests before the cloud's run (when a
    selected test's module uses tests/tempest.py)."""
    if any(getattr(getattr(item, "module", None), "tempest", None) is tempest for item in session.items):
        tempest.install_in_background()


def pytest_sessionfinish(session):
    tempest.stop_background_install()


# The lab's tests (marker `lab`) come last and take about two thirds as long as all the
# tests before them, and all of them follow the machine's pace by a factor of two: on
# the slowest machines seen the whole suite took longer than CI's 90 minutes
# (docs/design.md, "The suite's time"). So the lab starts only within LAB_STARTS_WITHIN minutes of the
# run's start; later, its tests are skipped, each saying why. Set
# KOLLA_SALT_LAB_STARTS_WITHIN=inf to run it whatever the time; `make test-lab` runs
# it alone.
LAB_STARTS_WITHIN = float(os.environ.get("KOLLA_SALT_LAB_STARTS_WITHIN", "45"))
RUN_BEGAN = time.monotonic()   # this file is read as the run starts, before any test
_lab = {}   # "skipped": why the lab's tests are skipped ("" once it started)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Decides, at the lab's first test, whether the lab starts (before its fixtures make it)."""
    if item.get_closest_marker("lab") is None:
        return
    if "skipped" not in _lab:
        minutes = (time.monotonic() - RUN_BEGAN) / 60
        _lab["skipped"] = "" if minutes <= LAB_STARTS_WITHIN else (
            f"the lab starts only within {LAB_STARTS_WITHIN:g} minutes of the run's start and {minutes:.0f} have "
            f"passed: this machine is too slow for the whole suite in CI's 90 minutes "
            f"(KOLLA_SALT_LAB_STARTS_WITHIN; `make test-lab` runs it alone)")
    if _lab["skipped"]:
        pytest.skip(_lab["skipped"])


_phases = {}   # nodeid: {phase: seconds}, until its teardown's report
_reporter = {}   # "terminal": pytest's terminal reporter, once configured


def pytest_runtest_logreport(report):
    """Under each test, as soon as it ends: what it printed if it passed (the figures it
    measures: failed requests, longest gaps, failover and deploy times; pytest shows a
    test's output only when it fails) and how long each phase took. A run CI stops
    at its time limit keeps what it had measured and where its time went."""
    phases = _phases.setdefault(report.nodeid, {})
    phases[report.when] = report.duration
    if report.when == "teardown":
        del _phases[report.nodeid]
    writer = _reporter.get("terminal")
    if writer is None:
        return
    if report.skipped and _lab.get("skipped") and not _lab.get("said"):   # whole, once (-v cuts it short)
        _lab["said"] = True
        writer.ensure_newline()
        writer.write_line(f"[suite] {_lab['skipped']}")
    # A report carries the output of its test's earlier phases too: each phase's own.
    printed = [text.strip() for name, text in report.sections
               if report.passed and name == f"Captured stdout {report.when}" and text.strip()]
    for text in printed:
        writer.ensure_newline()
        for line in text.splitlines():
            writer.write_line(f"    {line}")
    if report.when == "teardown":
        writer.ensure_newline()
        writer.write_line(f"    took {sum(phases.values()):.0f} s (" + ", ".join(
            f"{phase} {seconds:.0f} s" for phase, seconds in phases.items()) + ")")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if config.option.verbose > 0:   # a line per test (run-tests.sh): these lines under it
        _reporter["terminal"] = config.pluginmanager.get_plugin("terminalreporter")


def pytest_terminal_summary(terminalreporter):
    """The end of every run's log: the minutes per test file, slowest first, of the
    files that took 3 s or more: where the suite's time goes (the slowest steps alone
    do not add up)."""
    reports = [report for reports in terminalreporter.stats.values() for report in reports
               if getattr(report, "when", None) in ("setup", "call", "teardown")]
    per_file = {}
    for report in reports:
        path = report.nodeid.split("::")[0]
        per_file[path] = per_file.get(path, 0.0) + report.duration
    slow = sorted(((seconds, path) for path, seconds in per_file.items() if seconds >= 3), reverse=True)
    if slow:
        terminalreporter.section("minutes per test file")
        for seconds, path in slow:
            terminalreporter.write_line(f"{seconds / 60:6.1f}  {path}")
