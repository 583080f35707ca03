"""A real keystone release upgrade (source images from PyPI) and rollback."""
import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import IMAGES

pytestmark = pytest.mark.functional
KOLLA = str(Path(sys.executable).parent / "kolla-salt")
OLD, NEW = "2025.2", "2026.1"          # keystone 28.0.0 -> 29.0.0: 29 brings an expand migration
NEW_MIGRATION = "742c857f1dfb"


def alembic_versions(env, docker_client):
    mariadb = docker_client.containers.get(env.name("mariadb"))
    port = env.globals["database_port"]
    out = mariadb.exec_run(["mariadb", "--defaults-extra-file=/etc/mysql/kolla-client.cnf", "-h", "127.0.0.1",
                            "-P", str(port), "-N", "-e", "SELECT version_num FROM keystone.alembic_version"])
    assert out.exit_code == 0, out.output
    return out.output.decode().split()


def test_keystone_release_upgrade_and_rollback(kolla_env, docker_client):
    env = kolla_env
    env.write_globals(openstack_release=OLD, kolla_install_type="source", enable_rabbitmq=False)
    for release in (OLD, NEW):  # both releases' images exist before anything stops
        env.run("build", "--release", release, "mariadb", "memcached", "toolbox", "keystone")
    env.run("deploy")
    keystone = env.name("keystone")
    assert docker_client.containers.get(keystone).image.tags == [f"{IMAGES}/keystone:{OLD}-source"]
    env.openstack("project", "create", "--domain", "default", "kst-upgrade-project")
    env.openstack("user", "create", "--domain", "default", "--password", "pw-kst", "kst-upgrade-user")
    assert NEW_MIGRATION not in alembic_versions(env, docker_client)

    out = env.run("upgrade", "--release", NEW).stdout
    assert f"keystone to {NEW}" in out
    current = docker_client.containers.get(keystone)
    assert current.image.tags == [f"{IMAGES}/keystone:{NEW}-source"]
    assert current.labels["kolla.generation"] == "2"
    assert NEW_MIGRATION in alembic_versions(env, docker_client)   # db_sync ran the new migration
    # Keystone's rolling-upgrade order: expand while the old generation serves, contract
    # once the new one does; keystone's own check then finds nothing left to do.
    assert out.index(f"job {env.name('keystone_db_expand')} succeeded") < out.index(f"{keystone} recreated") \
        < out.index(f"job {env.name('keystone_db_contract')} succeeded"), out
    check = current.exec_run(["keystone-manage", "db_sync", "--check"], user="keystone")
    assert check.exit_code == 0, check.output
    # The database image has the same content in both releases (one image, two tags):
    # the database was not restarted, and its data is there.
    assert docker_client.containers.get(env.name("mariadb")).labels["kolla.generation"] == "1"
    assert "kst-upgrade-project" in env.openstack("project", "list", "-c", "Name").split()
    assert "kst-upgrade-user" in env.openstack("user", "list", "-c", "Name").split()
    assert env.openstack("token", "issue", "-c", "id").strip()
    assert docker_client.containers.get(f"{keystone}.gen1").status == "exited"   # kept for rollback

    # Back to OLD with the data: the database as the upgrade's backup holds it (the new
    # migration gone, what was written since too), keystone at OLD, declared so.
    env.openstack("project", "create", "--domain", "default", "kst-after-upgrade")
    refused = env.run("rollback", "--release", NEW, "--yes-i-really-mean-it", check=False)
    assert refused.returncode == 2 and f"nothing runs a release newer than {NEW}" in refused.stderr
    out = env.run("rollback", "--release", OLD, "--yes-i-really-mean-it").stdout
    print(out.splitlines()[-1])
    assert f"the cloud runs {OLD} with the database of backup" in out, out
    assert docker_client.containers.get(keystone).image.tags == [f"{IMAGES}/keystone:{OLD}-source"]
    assert NEW_MIGRATION not in alembic_versions(env, docker_client)
    projects = env.openstack("project", "list", "-c", "Name").split()
    assert "kst-upgrade-project" in projects and "kst-after-upgrade" not in projects
    assert env.openstack("token", "issue", "-c", "id").strip()
    assert yaml.safe_load((env.config_dir / "globals.yml").read_text())["openstack_release"] == OLD
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout

    # The next upgrade migrates again (the jobs' records went back with the data).
    env.run("upgrade", "--release", NEW)
    assert NEW_MIGRATION in alembic_versions(env, docker_client)
    generation = int(docker_client.containers.get(keystone).labels["kolla.generation"])

    out = env.run("rollback", keystone).stdout
    assert f"generation {generation + 1} runs what generation {generation - 1} ran" in out
    current = docker_client.containers.get(keystone)
    assert current.image.tags == [f"{IMAGES}/keystone:{OLD}-source"]
    assert "kst-upgrade-user" in env.openstack("user", "list", "-c", "Name").split()
    assert env.openstack("token", "issue", "-c", "id").strip()
    status = env.run("status", "--format", "json").stdout
    assert f'"generation": {generation + 1}' in status
    history = json.loads(env.run("history", "keystone", "--format", "json").stdout)
    assert [(h["generation"], h["outcome"].replace("pruned", "replaced"), h["image"]) for h in history][-3:] == [
        (generation - 1, "replaced", f"{IMAGES}/keystone:{OLD}-source"),
        (generation, "replaced", f"{IMAGES}/keystone:{NEW}-source"),
        (generation + 1, "running", f"{IMAGES}/keystone:{OLD}-source")]
    assert not any(secret in env.run("history", "keystone").stdout for secret in env.passwords().values())


def test_a_release_jump_is_refused_and_with_the_override_keystone_still_issues_tokens(kolla_env, docker_client):
    """zed (binary, Debian's packages) to 2026.1 (source, PyPI) skips four releases:
    refused before anything changes. Allowed explicitly, the source keystone reads
    the fernet keys the binary one wrote (one keystone uid in both) and issues tokens."""
    env = kolla_env
    env.write_globals(openstack_release="zed", kolla_install_type="binary", enable_rabbitmq=False)
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
    assert docker_client.containers.get(keystone).image.tags == [f"{IMAGES}/keystone:{NEW}-source"]
    assert "kst-jump-project" in env.openstack("project", "list", "-c", "Name").split()
    assert env.openstack("token", "issue", "-c", "id").strip()
