"""An operator coming from kolla-ansible 22 keeps their files: the sample globals.yml
kolla-ansible ships, edited as its quickstart says (Ansible's "yes"/"no" values),
and the passwords.yml its own kolla-genpwd fills (SSH key pairs, a 0640 mode),
validate and deploy unchanged."""
import os
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.functional
KOLLA_ANSIBLE = "kolla-ansible==22.2.0"


@pytest.fixture(scope="module")
def kolla_ansible(tmp_path_factory):
    """kolla-ansible from PyPI, in a virtualenv of its own: (its sample folder, kolla-genpwd)."""
    venv = tmp_path_factory.mktemp("kolla-ansible") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", KOLLA_ANSIBLE],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples = venv / "share" / "kolla-ansible" / "etc_examples" / "kolla"
    return samples, venv / "bin" / "kolla-genpwd"


def test_kolla_ansible_sample_files_validate_and_deploy(kolla_env, kolla_ansible, built_images, docker_client):
    built_images("mariadb", "memcached", "toolbox", "keystone")
    samples, genpwd = kolla_ansible
    env = kolla_env
    passwords = env.config_dir / "passwords.yml"
    passwords.write_text((samples / "passwords.yml").read_text())
    subprocess.run([str(genpwd), "-p", str(passwords)], check=True, capture_output=True)
    assert os.stat(passwords).st_mode & 0o777 == 0o640     # what kolla-genpwd leaves
    sample = (samples / "globals.yml").read_text()
    # The quickstart's edits, as an operator writes them, then this test's own names and ports.
    operator = {"kolla_base_distro": "debian", "network_interface": "lo", "kolla_internal_vip_address": "127.0.0.1",
                "enable_haproxy": "no", "enable_rabbitmq": "no", "enable_cron": "no", "enable_keystone": "yes",
                "enable_memcached": "yes"}
    ours = {k: v for k, v in env.globals.items() if k not in operator}
    (env.config_dir / "globals.yml").write_text(sample + "\n" + yaml.safe_dump({**operator, **ours}))

    proc = env.run("validate")
    assert "valid; 3 service(s) for this host: mariadb, memcached, keystone" in proc.stdout
    assert "key 'kolla_base_distro'" not in proc.stderr   # kolla-ansible's base key is kolla-salt's too
    assert "mode was 0640, made 0600" in proc.stderr
    assert os.stat(passwords).st_mode & 0o777 == 0o600
    assert "keystone_ssh_key" in yaml.safe_load(passwords.read_text())          # kept as it was

    env.run("deploy")
    assert env.openstack("token", "issue", "-c", "id").strip()
