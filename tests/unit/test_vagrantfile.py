"""The Vagrantfile brings up the lab's topology on VMs with the lab's own
provisioning. It cannot boot VMs here: `vagrant validate` checks it where Vagrant
is installed (Debian's package), and it is read for what it uses everywhere."""
import re
import shutil
import subprocess

import pytest

from kolla_salt import paths
from kolla_salt.lab import namespaces
from kolla_salt.roads import node

VAGRANTFILE = (paths.REPO / "Vagrantfile").read_text()


def test_it_reads_the_labs_topology_and_provisions_with_the_labs_script():
    assert re.search(r'YAML\.load_file\(File\.join\(__dir__, "lab", "topology\.yml"\)\)', VAGRANTFILE)
    assert namespaces.TOPOLOGY == paths.REPO / "lab" / "topology.yml"
    assert "bash scripts/provision-node.sh #{role} #{args}" in VAGRANTFILE
    assert namespaces.PROVISION == paths.REPO / "scripts" / "provision-node.sh"
    # Every VM's engine pulls from the master's registry, which speaks plain HTTP.
    assert 'REGISTRY = "#{MASTER}:#{TOPOLOGY["registry_port"]}"' in VAGRANTFILE
    assert VAGRANTFILE.count("KOLLA_SALT_INSECURE_REGISTRY=#{REGISTRY} bash scripts/setup-host.sh") == 2
    assert "KOLLA_SALT_INSECURE_REGISTRY" in (paths.REPO / "scripts" / "setup-host.sh").read_text()
    assert "systemctl enable --now docker-registry" in VAGRANTFILE and "docker_registry_insecure: true" in VAGRANTFILE
    # Names and addresses come from the topology: none is written in the Vagrantfile.
    for host in namespaces.load_topology()["hosts"]:
        assert host["name"] not in VAGRANTFILE and host["address"] not in VAGRANTFILE


def test_a_master_is_made_to_serve_the_operator_folder_and_heal_through_its_reactor(tmp_path):
    config = node.master_config(tmp_path, "master", "198.18.0.1", "/etc/kolla-salt")
    assert config["id"] == "master" and config["interface"] == "198.18.0.1"
    assert config["kolla_config_dir"] == "/etc/kolla-salt"
    assert config["pillar_roots"] == {"base": [str(paths.PILLAR_DIR)]}
    (reaction,) = config["reactor"]
    assert list(reaction) == ["salt/beacon/*/kolla_health/*/unhealthy"]
    minion = node.minion_config(tmp_path, "host2", "198.18.0.1", {"kolla_lab": "x"})
    assert (minion["id"], minion["master"]) == ("host2", "198.18.0.1")


def test_vagrant_validates_it_with_every_host_of_the_topology():
    if not shutil.which("vagrant"):
        pytest.skip("vagrant is not installed (Debian's package pulls a kernel: not part of make setup)")
    hosts = namespaces.load_topology()["hosts"]
    proc = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=paths.REPO, capture_output=True,
                          text=True, timeout=300, env={"KOLLA_LAB_HOSTS": str(len(hosts)), "PATH": "/usr/bin:/bin",
                                                       "HOME": "/root"})
    assert proc.returncode == 0 and "Vagrantfile validated successfully" in proc.stdout, proc.stdout + proc.stderr
    for name in ["master"] + [h["name"] for h in hosts]:
        assert f"==> {name}:" in proc.stdout
