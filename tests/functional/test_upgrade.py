"""A jump over several releases: refused unless allowed; a move to another base: the
containers that cross by a swap cross, the database is held on its base. (The release
upgrade and its rollback are test_cloud.py's whole-cloud tests and
test_declared_state.py's keystone.)"""
import time

import pytest
import yaml
from conftest import IMAGES

from kolla_salt.declaration.settings import default_tag

pytestmark = pytest.mark.functional
NEW = "2026.1"


def test_a_release_jump_is_refused_and_with_the_override_keystone_still_issues_tokens(kolla_env, docker_client):
    """zed (binary, Debian's packages) to 2026.1 (source, PyPI) skips four releases:
    refused before anything changes. Allowed explicitly, the source keystone reads
    the fernet keys the binary one wrote (one keystone uid in both) and issues tokens.
    Both on bookworm (zed's only base). Declaring 2026.1's default base (trixie) then is
    a move of a running cloud to another base: a deploy refuses it, before anything
    changes, for the database alone (its folder's `base_move`: MariaDB's route is not
    built), naming the command that holds it; `upgrade --base trixie` holds MariaDB
    on bookworm in pins.yml and swaps keystone and memcached onto trixie: the data
    is there, tokens are issued, and the next deploy changes nothing."""
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
    mariadb = env.name("mariadb")
    assert f"mariadb: {mariadb} runs on debian-bookworm images, declared debian-trixie: MariaDB's community " \
        "upgrades go one LTS at a time" in proc.stderr, proc.stderr
    assert "`kolla-salt upgrade --base trixie` holds it on bookworm (pins.yml)" in proc.stderr
    assert "keystone" not in proc.stderr and "memcached" not in proc.stderr, proc.stderr   # they cross by swaps
    assert {c.name: c.id for c in docker_client.containers.list(filters={"name": env.prefix})} == running

    began = time.monotonic()
    out = env.run("upgrade", "--base", "trixie").stdout
    print(f"\nupgrade --base trixie (keystone and memcached swapped, mariadb held): {time.monotonic() - began:.1f} s")
    assert "[upgrade] mariadb stays on bookworm (pins.yml services.mariadb.base)" in out, out
    assert yaml.safe_load((env.config_dir / "pins.yml").read_text())["services"] == {"mariadb": {"base": "bookworm"}}
    assert "mariadb follows base bookworm" in env.run("status").stdout
    tags = {name: docker_client.containers.get(env.name(name)).image.tags[0].rsplit(":", 1)[1]
            for name in ("mariadb", "memcached", "keystone")}
    assert tags == {"mariadb": f"{NEW}-source-bookworm", "memcached": f"{NEW}-source-trixie",
                    "keystone": f"{NEW}-source-trixie"}, tags
    assert docker_client.containers.get(mariadb).id == running[mariadb]
    assert "kst-jump-project" in env.openstack("project", "list", "-c", "Name").split()
    assert env.openstack("token", "issue", "-c", "id").strip()
    assert "0 changed, 0 failed" in env.run("deploy").stdout
