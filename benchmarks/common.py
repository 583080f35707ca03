"""Shared by the benchmarks: a throw-away operator folder with its own names
and loopback ports, the CLI over it (everything it creates is removed), and the
probes the tests use too (tests/probes.py: Prober and what it asks)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from probes import (Prober, keystone_answers, memcached_answers, projects_listed, token_issue,  # noqa: E402,F401
                    token_request)

KOLLA = str(Path(sys.executable).parent / "kolla-salt")
from guest import openstack  # noqa: E402

from kolla_salt.declaration.settings import default_ports  # noqa: E402

# Every port setting (kolla_salt.declaration.settings.default_ports) moved away from a real cloud's and the
# tests' (tests/conftest.py), and below the ephemeral ports, like the tests'.
PORTS = {key: port + 10000 if port < 20000 else port - 5000 for key, port in default_ports().items()}
assert len(set(PORTS.values())) == len(PORTS), PORTS
# As in tests/conftest.py: images of another namespace than kolla-salt (a branch under work).
NAMESPACE = os.environ.get("KOLLA_SALT_TEST_NAMESPACE", "")


def noop_deploy(args, marks, rest):
    """A `kolla-salt ARGS deploy` that must change nothing: (its seconds, [(phase,
    seconds)]), where phase i ends when the first line holding marks[i][1] appears and
    `rest` is what follows the last one."""
    started = time.monotonic()
    proc = subprocess.Popen([KOLLA, *args, "deploy"], stdout=subprocess.PIPE, text=True)
    seen, output = [], []
    for line in proc.stdout:
        output.append(line)
        seen.append((time.monotonic() - started, line))
    if proc.wait() != 0:
        raise SystemExit("kolla-salt deploy failed:\n" + "".join(output[-40:]))
    total = time.monotonic() - started
    if " 0 changed, 0 failed" not in "".join(output):
        raise SystemExit("the deploy was not a no-op:\n" + "".join(output[-40:]))
    ends = [next(at for at, line in seen if mark in line) for _, mark in marks]
    return total, [(label, end - begin) for (label, _), begin, end in zip(marks, [0, *ends], ends)] + [
        (rest, total - ends[-1])]


def timed(*args):
    """Runs kolla-salt ARGS (any operator folder: --lab, --master); its duration in s,
    or the end of the benchmark with its output when it fails."""
    started = time.monotonic()
    proc = subprocess.run([KOLLA, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"kolla-salt {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - started


class BenchEnv:
    def __init__(self, prefix, **globals_):
        self.root = Path(tempfile.mkdtemp(prefix="kolla-bench-"))
        self.prefix = prefix
        self.config_dir = self.root / "config"
        self.config_dir.mkdir()
        self.globals = {"container_name_prefix": prefix, "node_config_directory": str(self.root / "etc"),
                        "kolla_state_directory": str(self.root / "state"),
                        "kolla_log_directory": str(self.root / "log"), "enable_health_loop": False,
                        # keystone's figures need no glance or placement, and they ask keystone on its own
                        # port (no haproxy); deploy_time.py and rolling_upgrade.py say what they want
                        "enable_glance": False, "enable_placement": False, "enable_haproxy": False,
                        **({"docker_namespace": NAMESPACE} if NAMESPACE else {}), **PORTS, **globals_}
        self.write_globals()
        self.run("genpwd")

    def write_globals(self, **changes):
        self.globals.update(changes)
        (self.config_dir / "globals.yml").write_text(yaml.safe_dump(self.globals))

    def run(self, *args):
        proc = subprocess.run([KOLLA, "--config-dir", str(self.config_dir), *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"kolla-salt {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def passwords(self):
        return yaml.safe_load((self.config_dir / "passwords.yml").read_text())

    def openstack(self, *args, values=True):
        """The real python-openstackclient, as the admin of this cloud (tests/guest.py)."""
        return openstack(self.config_dir, *args, values=values)

    def timed(self, *args):
        start = time.monotonic()
        self.run(*args)
        return time.monotonic() - start

    def close(self):
        from kolla_salt.healing import healthloop
        healthloop.stop_health_daemon(self.globals)
        client = docker.from_env()
        for container in client.containers.list(all=True):
            if container.name.startswith(self.prefix):
                container.remove(force=True)
        for volume in client.volumes.list():
            if volume.name.startswith(self.prefix):
                volume.remove(force=True)
        shutil.rmtree(self.root, ignore_errors=True)
