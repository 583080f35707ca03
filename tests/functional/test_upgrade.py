"""A jump over several releases: refused unless allowed; a move to another base:
refused. (The release upgrade and its rollback are test_cloud.py's whole-cloud tests
and test_declared_state.py's keystone.)"""
import pytest
from conftest import IMAGES

from kolla_salt.declaration.settings import default_tag

pytestmark = pytest.mark.functional
NEW = "2026.1"


def test_a_release_jump_is_refused_and_with_the_override_keystone_still_issues_tokens(kolla_env, docker_client):
    """zed (binary, Debian's packages) to 2026.1 (source, PyPI) skips four releases:
    refused before anything changes. Allowed explicitly, the source keystone reads
    the fernet keys the binary one wrote (one keystone uid in both) and issues tokens.
    Both on bookworm (zed's only base): declaring 2026.1's default base (trixie) then is
    a move of a running cloud to another base, refused naming the key that keeps it."""
    env = kolla_env
    env.write_globals(openstack_release="zed", kolla_install_type="binary", enable_rabbitmq=False,
                      kolla_base_distro_version="bookworm")
    env.run("build", "--release", "zed", "mariadb", "memcached", "toolbox", "keystone")
    env.run("build", "--release", NEW, "mariadb", "memcached", "toolbox", "keystone")
    env.run("deploy")
    keystone = env.name("keystone")
    before = docker_client.containers.get(keystone).id
    env.openstack("project", "create", "--domain", "default", "kst-jump-project")

    env.write_globals(openstack_release=NEW, kolla_install_type="source")
    proc = env.run("deploy", check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"keystone: runs zed, declared {NEW}: zed -> {NEW} skips releases" in proc.stderr
    assert docker_client.containers.get(keystone).id == before

    out = env.run("deploy", "--allow-release-jump").stdout
    assert f"--allow-release-jump: keystone: runs zed, declared {NEW}" in out
    assert docker_client.containers.get(keystone).image.tags == [f"{IMAGES}/keystone:{NEW}-source-bookworm"]
    assert "kst-jump-project" in env.openstack("project", "list", "-c", "Name").split()
    assert env.openstack("token", "issue", "-c", "id").strip()

    running = {c.name: c.id for c in docker_client.containers.list(filters={"name": env.prefix})}
    env.write_globals(kolla_base_distro_version=None)   # the release's default: trixie
    assert default_tag(NEW).endswith("-trixie")
    proc = env.run("deploy", check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"keystone: {keystone} runs on debian-bookworm images, declared debian-trixie: moving a running cloud "
            f"to another base is not supported yet") in proc.stderr
    assert 'set kolla_base_distro_version: "bookworm" in globals.yml to keep it' in proc.stderr
    assert {c.name: c.id for c in docker_client.containers.list(filters={"name": env.prefix})} == running
