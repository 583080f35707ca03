"""The lab: hosts on one machine, each a network namespace with its own Docker
engine and salt-minion, a salt-master and a registry on the lab's switch. Its own
name (kstlab), so it never meets a user's lab; `lab down` leaves nothing behind."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from kolla_salt.inventory import default_image
from kolla_salt.lab import DATA_ROOT, RUN_ROOT, Lab

pytestmark = pytest.mark.integration
KOLLA = str(Path(sys.executable).parent / "kolla-salt")
NAME = "kstlab"


def lab(*args):
    proc = subprocess.run([KOLLA, "lab", *args, "--name", NAME, "--hosts", "2"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def namespaces():
    return [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                       text=True).stdout.splitlines() if line.startswith(NAME)]


@pytest.fixture(scope="module")
def hosts(built_images):
    built_images("memcached")
    try:
        lab("up")
        yield Lab(NAME, 2).describe()["hosts"]
    finally:
        lab("down")


def test_hosts_answer_the_master_and_pull_from_the_registry(hosts):
    assert "host1\t198.18.0.11\tanswers" in lab("status") and "host2\t198.18.0.12\tanswers" in lab("status")
    image = default_image("memcached")
    lab("push", image)
    host1 = docker.DockerClient(base_url=hosts[0]["docker_host"], timeout=120)
    pulled = host1.images.pull(f"198.18.0.1:5000/{image}")
    container = host1.containers.run(pulled.id, ["/usr/bin/memcached", "-u", "memcache", "-l", "198.18.0.11"],
                                     name="kstlab-memcached", network_mode="host", detach=True)
    try:
        assert container.exec_run(["hostname"]).output.decode().strip() == "host1"
        # host2 reaches host1's --network host container at host1's address.
        probe = ("import socket,time\nfor _ in range(50):\n  try: c = socket.create_connection(('198.18.0.11', 11211), 2)\n"
                 "  except OSError: time.sleep(0.2); continue\n  c.sendall(b'stats\\r\\n'); print(c.recv(64)); break\n")
        out = subprocess.run(["ip", "netns", "exec", hosts[1]["namespace"], sys.executable, "-c", probe],
                             capture_output=True, text=True, timeout=60).stdout
        assert "STAT pid" in out
    finally:
        container.remove(force=True)
    # The machine's own engine does not know the lab's containers.
    assert "kstlab-memcached" not in [c.name for c in docker.from_env().containers.list(all=True)]


def test_lab_up_repairs_a_dead_engine(hosts):
    pid = int((RUN_ROOT / NAME / "host2-engine.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    assert "host2: Docker engine" in lab("up")
    assert docker.DockerClient(base_url=hosts[1]["docker_host"], timeout=30).ping()


def test_each_host_has_folders_of_its_own(hosts):
    """What kolla-salt writes on a host (/etc/kolla, its state, its logs) is that
    host's: its minion sees it, the other host and this machine do not."""
    import json
    lab_ = Lab(NAME, 2)
    probe = "/etc/kolla/kstlab-probe"
    out = lab_.salt("salt", "host1", "file.write", probe, "host1 was here", "--out=json").stdout
    assert "Wrote" in out, out
    seen = json.loads(lab_.salt("salt", "*", "file.file_exists", probe, "--out=json", "--static").stdout)
    assert seen == {"host1": True, "host2": False}
    assert not Path(probe).exists()
    grains = json.loads(lab_.salt("salt", "host2", "grains.item", "host", "ip4_interfaces", "--out=json").stdout)
    assert grains["host2"]["host"] == "host2" and grains["host2"]["ip4_interfaces"]["eth0"] == ["198.18.0.12"]


def test_the_master_deploys_on_every_host_pulling_from_the_registry(hosts):
    """memcached on both hosts from the master (salt '*' state.apply kolla.deploy):
    each host pulls the image from the lab's registry and serves on its own address;
    a second run through the master changes nothing."""
    import json

    import yaml
    lab_ = Lab(NAME, 2)
    globals_file = Path(lab_.config_dir()) / "globals.yml"
    settings = yaml.safe_load(globals_file.read_text())
    assert settings == {"network_interface": "eth0", "docker_registry": "198.18.0.1:5000"}
    settings.update(enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False, enable_cron=False)
    globals_file.write_text(yaml.safe_dump(settings))
    lab("push", default_image("memcached"))
    assert lab_.salt("salt", "*", "saltutil.sync_all", timeout=120).returncode == 0

    def deploy():
        proc = lab_.salt("salt", "*", "state.apply", "kolla.deploy", "--out=json", "--static", timeout=600)
        results = json.loads(proc.stdout)
        assert proc.returncode == 0 and sorted(results) == ["host1", "host2"], proc.stdout[-2000:]
        return {host: [r["comment"] for r in states.values() if r["changes"]] for host, states in results.items()}

    first = deploy()
    for host in ("host1", "host2"):
        assert "memcached created, generation 1 is healthy" in first[host]
    probe = ("import socket\nc = socket.create_connection(('198.18.0.11', 11211), 3)\n"
             "c.sendall(b'stats\\r\\n'); print(c.recv(64))\n")
    out = subprocess.run(["ip", "netns", "exec", hosts[1]["namespace"], sys.executable, "-c", probe],
                         capture_output=True, text=True, timeout=60).stdout
    assert "STAT pid" in out
    assert docker.DockerClient(base_url=hosts[1]["docker_host"]).containers.get("memcached").image.tags == [
        f"198.18.0.1:5000/{default_image('memcached')}"]
    assert deploy() == {"host1": [], "host2": []}
    # host2 leaves the control role: the next deploy removes its memcached (volumes
    # kept), and its pillar holds neither that service nor any secret.
    settings["roles"] = {"control": ["host1"], "compute": ["host2"], "network": ["host1"], "storage": ["host1"]}
    globals_file.write_text(yaml.safe_dump(settings))
    changed = deploy()
    assert changed["host1"] == [], changed
    assert changed["host2"] == ["removed 1 container(s) of services disabled or not meant for this host "
                                "(volumes kept)"], changed
    assert [c.name for c in docker.DockerClient(base_url=hosts[1]["docker_host"]).containers.list(all=True)] == []
    seen = json.loads(lab_.salt("salt", "host2", "pillar.items", "--out=json").stdout)["host2"]["kolla"]
    assert seen["services"] == [] and seen["passwords"] == {}


def test_lab_down_leaves_nothing_behind(hosts):
    pids = [int(p.read_text()) for p in (RUN_ROOT / NAME).glob("*.pid")]
    lab("down")
    assert namespaces() == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert not (DATA_ROOT / NAME).exists() and not (RUN_ROOT / NAME).exists()
    assert not [line for line in Path("/proc/mounts").read_text().splitlines() if f"/{NAME}" in line]
