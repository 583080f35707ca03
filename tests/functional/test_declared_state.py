"""The declared state is the truth: what upgrade, rollback, destroy and a disabled
service leave behind is what the next deploy keeps, so that deploy is a no-op."""
import functools
import json
import shutil
import socket
import urllib.error

import docker.errors
import pytest
import yaml
from conftest import IMAGES
from probes import token_issue, token_valid

from kolla_salt.declaration.settings import default_tag
from kolla_salt.operations import keys

pytestmark = pytest.mark.functional
CONTROL = {"enable_rabbitmq": False, "enable_cron": False}
RELEASE, NEXT = "2026.1", "2026.2"


def started(docker_client, env, services):
    return {s: (c.id, c.attrs["State"]["StartedAt"])
            for s in services for c in [docker_client.containers.get(env.name(s))]}


def test_a_disabled_service_is_removed_and_its_volumes_kept(kolla_env, built_images, docker_client):
    built_images("memcached", "cron")
    env = kolla_env
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False, enable_cron=True)
    env.run("deploy")
    cron = docker_client.containers.get(env.name("cron"))
    memcached_before = started(docker_client, env, ["memcached"])
    env.write_globals(enable_cron=False)
    out = env.run("deploy", "--test").stdout
    assert "would remove 1 container(s) of services disabled or not meant for this host" in out
    assert env.name("cron") in out
    assert docker_client.containers.get(env.name("cron")).status == "running"   # --test changed nothing
    out = env.run("deploy").stdout
    assert "removed 1 container(s) of services disabled or not meant for this host (volumes kept)" in out
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(cron.id)
    assert started(docker_client, env, ["memcached"]) == memcached_before
    history = json.loads(env.run("history", "cron", "--format", "json").stdout)
    assert [h["outcome"] for h in history] == ["removed"]
    assert "0 changed, 0 failed" in env.run("deploy").stdout
    env.write_globals(enable_cron=True)                # enabling it again brings it back
    env.run("deploy")
    assert docker_client.containers.get(env.name("cron")).labels["kolla.generation"] == "2"


def test_destroy_marks_removed_a_container_already_removed_by_hand(kolla_env, built_images, docker_client):
    built_images("memcached")
    env = kolla_env
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False)
    env.run("deploy")
    docker_client.containers.get(env.name("memcached")).remove(force=True)   # docker rm -f, by hand
    env.run("destroy", "--yes-i-really-mean-it")
    history = json.loads(env.run("history", "memcached", "--format", "json").stdout)
    assert [h["outcome"] for h in history] == ["removed"]


def test_a_service_failing_its_first_deploy_stops_what_waits_for_it_and_not_what_runs_beside_it(
        kolla_env, built_images, docker_client):
    """On a host's first deploy the services run side by side. memcached cannot
    listen (its port is taken): RabbitMQ and the database beside it still come up,
    keystone (which waits for memcached) is not started, and the report says how
    each ended."""
    built_images("mariadb", "rabbitmq", "memcached", "keystone", "toolbox")
    env = kolla_env
    with socket.create_server(("127.0.0.1", env.globals["memcached_port"])):
        proc = env.run("deploy", check=False)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert f"FAILED  {env.name('memcached')}:" in out, out
    for beside in ("mariadb", "rabbitmq"):   # RabbitMQ's boot takes longer than memcached's failure
        assert f"changed {env.name(beside)}: {env.name(beside)} created" in out, out
        assert docker_client.containers.get(env.name(beside)).status == "running"
    keystone_states = [line for line in out.splitlines() if line.startswith("FAILED") and "keystone" in line]
    assert keystone_states and all("One or more requisite failed" in line for line in keystone_states), out
    assert not docker_client.containers.list(all=True, filters={"name": env.name("keystone")})


@pytest.fixture(scope="module")
def cloud(tmp_path_factory, docker_client, built_images):
    """mariadb, memcached and keystone at RELEASE, with NEXT's images built too."""
    from conftest import KollaEnv
    for release in (RELEASE, NEXT):
        built_images("--release", release, "mariadb", "memcached", "toolbox", "keystone")
    env = KollaEnv(tmp_path_factory.mktemp("declared"), "kstdecl-")
    env.cleanup(docker_client)
    env.write_globals(openstack_release=RELEASE, kolla_install_type="source", **CONTROL)
    env.run("deploy")
    yield env
    env.cleanup(docker_client)


def keystone_tag(docker_client, env):
    return docker_client.containers.get(env.name("keystone")).attrs["Config"]["Image"].rsplit(":", 1)[1]


def test_a_downgrade_is_refused_before_anything_changes(cloud, docker_client):
    env = cloud
    keystone = docker_client.containers.get(env.name("keystone")).id
    globals_before = (env.config_dir / "globals.yml").read_text()
    proc = env.run("upgrade", "--release", "2025.2", check=False)
    assert proc.returncode == 2
    assert f"keystone: runs {RELEASE}, declared 2025.2: {RELEASE} -> 2025.2 is a downgrade" in proc.stderr
    assert (env.config_dir / "globals.yml").read_text() == globals_before
    assert docker_client.containers.get(env.name("keystone")).id == keystone


def test_a_per_service_upgrade_leaves_other_services_alone(cloud, docker_client):
    """...and one the deploy's first states refuse (an override no file of keystone's
    takes, which only the whole pillar finds) is taken back from pins.yml."""
    env = cloud
    others = started(docker_client, env, ["mariadb", "memcached"])
    globals_before = (env.config_dir / "globals.yml").read_text()
    pins = env.config_dir / "pins.yml"
    pins_before = pins.read_text() if pins.exists() else None
    override = env.config_dir / "config" / "keystone" / "no-such-file.conf"
    override.parent.mkdir(parents=True, exist_ok=True)
    override.write_text("[DEFAULT]\n")
    try:
        proc = env.run("upgrade", "--services", "keystone", "--release", NEXT, check=False)
    finally:
        override.unlink()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{override}: keystone has no config file 'no-such-file.conf'" in proc.stderr, proc.stderr
    assert (pins.read_text() if pins.exists() else None) == pins_before
    assert keystone_tag(docker_client, env) == default_tag(RELEASE)
    out = env.run("upgrade", "--services", "keystone", "--release", NEXT).stdout
    assert keystone_tag(docker_client, env) == default_tag(NEXT)
    # keystone's migrations go forward: the deploy backed the database up before them
    assert out.index("taken before the migrations") < out.index(f"job {env.name('keystone_db_expand')} succeeded"), out
    assert f"before the upgrade to {NEXT} (kolla-salt upgrade)" in env.run("mariadb-backup", "--list").stdout
    assert (env.config_dir / "globals.yml").read_text() == globals_before
    assert f"keystone follows release {NEXT}" in env.run("status").stdout
    out = env.run("deploy").stdout
    assert "0 changed, 0 failed" in out, out
    assert started(docker_client, env, ["mariadb", "memcached"]) == others
    assert env.openstack("token", "issue", "-c", "id").strip()


def test_a_rollback_survives_a_deploy(cloud, docker_client):
    env = cloud
    env.run("rollback", "keystone")
    assert keystone_tag(docker_client, env) == default_tag(RELEASE)
    keystone = docker_client.containers.get(env.name("keystone")).id
    out = env.run("deploy", "--test").stdout
    assert "0 changed, 0 failed" in out, out
    assert "held at what generation" in out
    env.run("deploy")
    assert docker_client.containers.get(env.name("keystone")).id == keystone
    assert env.openstack("token", "issue", "-c", "id").strip()
    # The held keystone's files keep the passwords it was made with: changing one it
    # uses is refused before anything changes (its bootstrap job would lock it out).
    path = env.config_dir / "passwords.yml"
    kept = path.read_text()
    path.write_text(yaml.safe_dump({**env.passwords(), "keystone_admin_password": "kst-changed-under-a-pin"}))
    refused = env.run("deploy", check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (f"{path}: key 'keystone_admin_password' changed since pins.yml held {env.name('keystone')}"
            in refused.stderr), refused.stderr
    assert "kst-changed-under-a-pin" not in refused.stdout + refused.stderr
    assert docker_client.containers.get(env.name("keystone")).id == keystone
    path.write_text(kept)
    # unpin: keystone follows globals.yml (RELEASE) again, which it already runs.
    env.run("unpin", "keystone")
    assert not (env.config_dir / "pins.yml").exists()
    assert "0 changed, 0 failed" in env.run("deploy").stdout
    assert docker_client.containers.get(env.name("keystone")).id == keystone


def test_a_new_admin_password_reaches_keystone_and_keeps_its_health_check_passing(cloud, docker_client):
    """The operator changes keystone_admin_password in passwords.yml: the next deploy
    gives the admin the new password (keystone-manage bootstrap) and keystone's health
    user the new one derived from it (kolla_keystone_bootstrap updates that user), so
    the keystone it starts passes its check; the old password is refused, and the
    deploy after changes nothing."""
    env = cloud
    port = env.globals["keystone_public_port"]
    path = env.config_dir / "passwords.yml"
    passwords = env.passwords()
    old = passwords["keystone_admin_password"]
    path.write_text(yaml.safe_dump({**passwords, "keystone_admin_password": "kst-new-admin-password"}))
    out = env.run("deploy").stdout
    assert f"ran {env.name('keystone_bootstrap')}" in out, out
    keystone = docker_client.containers.get(env.name("keystone"))
    assert keystone.exec_run(["kolla_keystone_check"]).exit_code == 0
    assert env.openstack("token", "issue", "-c", "id").strip()
    with pytest.raises(urllib.error.HTTPError) as refused:
        token_issue(port, old)
    assert refused.value.code == 401
    assert " 0 changed, 0 failed" in env.run("deploy").stdout


def test_a_release_change_restarts_no_infrastructure_container(cloud, docker_client):
    """mariadb and memcached images have the same content in both releases (one
    image, two tags): the release upgrade replaces keystone only."""
    env = cloud
    for service in ("mariadb", "memcached", "toolbox"):
        assert (docker_client.images.get(f"{IMAGES}/{service}:{default_tag(RELEASE)}").id
                == docker_client.images.get(f"{IMAGES}/{service}:{default_tag(NEXT)}").id)
    infrastructure = started(docker_client, env, ["mariadb", "memcached"])
    out = env.run("upgrade", "--release", NEXT).stdout
    assert keystone_tag(docker_client, env) == default_tag(NEXT)
    assert started(docker_client, env, ["mariadb", "memcached"]) == infrastructure
    assert f"ran {env.name('keystone_database')}" not in out   # same toolbox image: its job does not run again
    assert "0 changed, 0 failed" in env.run("deploy").stdout


def test_a_killed_keystone_swap_leaves_one_keystone_serving(cloud, docker_client):
    """keystone swaps with overlap: killed while its new generation starts beside the
    old one, the next command removes the new one; the next deploy does the rollback
    that was declared."""
    from test_swap_crash import assert_one_generation_serves, kill_rollback_at
    env = cloud
    name = env.name("keystone")
    interrupted = kill_rollback_at(env, name, "created")
    assert interrupted is not None and interrupted["step"] == "created"
    assert docker_client.containers.get(f"{name}.next")   # the new generation, beside the old one
    env.run("status")
    assert_one_generation_serves(env, docker_client, name, interrupted["old_generation"])
    assert env.openstack("token", "issue", "-c", "id").strip()
    env.run("deploy")
    assert keystone_tag(docker_client, env) == default_tag(RELEASE)
    assert "0 changed, 0 failed" in env.run("deploy").stdout


def test_rotated_keys_reach_keystone_only_once_it_holds_the_current_ones(cloud, docker_client):
    """rotate-keys makes the staged key primary and stages a new one in the operator
    folder, then deploys them: a token issued before still validates. It is refused
    while the volume does not hold the current keys (a deploy writes them back); a
    volume holding other credential keys is refused, not overwritten; genpwd adopts
    a volume's keys the operator folder lacks."""
    env = cloud
    valid = functools.partial(token_valid, env.globals["keystone_public_port"], env.passwords()["keystone_admin_password"])
    fernet = env.config_dir / "keys" / "keystone" / "fernet"
    keystone = docker_client.containers.get(env.name("keystone"))

    def in_volume(folder="fernet-keys"):
        listing = keystone.exec_run(["sh", "-c", f"cd /etc/keystone/{folder} && for k in *; do echo $k $(cat $k); done"],
                                    user="root").output.decode()
        return dict(line.split() for line in listing.splitlines())

    before = env.openstack("token", "issue", "-c", "id").strip()
    staged = keys.load(fernet)["0"]
    out = env.run("rotate-keys").stdout
    assert "key 2 is the primary one now, a new key is staged, 3 kept" in out, out
    assert f"volume {env.name('keystone_fernet_keys')}: keys written" in out
    assert in_volume() == keys.load(fernet) and in_volume()["2"] == staged
    assert keystone.id == docker_client.containers.get(env.name("keystone")).id   # keystone reads them as it goes
    assert valid(before)
    assert valid(env.openstack("token", "issue", "-c", "id").strip())
    assert "0 changed, 0 failed" in env.run("deploy", "--test").stdout

    keystone.exec_run(["rm", "/etc/keystone/fernet-keys/0"], user="root")   # a host the last deploy missed
    proc = env.run("rotate-keys", check=False)
    assert proc.returncode == 1 and "run `kolla-salt deploy` first" in proc.stderr, proc.stderr
    assert keys.load(fernet) == in_volume() | {"0": keys.load(fernet)["0"]}   # nothing rotated
    env.run("deploy")
    assert in_volume() == keys.load(fernet)

    credential = env.config_dir / "keys" / "keystone" / "credential"
    held = in_volume("credential-keys")
    keys.save(credential, keys.new_repository())        # not the keys the database's credentials need
    proc = env.run("deploy", check=False)
    assert proc.returncode == 1 and "holds keys other than the declared ones" in proc.stdout, proc.stdout
    assert in_volume("credential-keys") == held
    shutil.rmtree(credential)
    assert "adopted from the volume" in env.run("genpwd").stdout
    assert keys.load(credential) == held
    assert "0 changed, 0 failed" in env.run("deploy", "--test").stdout


def test_a_keystone_that_cannot_issue_tokens_is_not_healthy_and_a_deploy_repairs_its_keys(cloud, docker_client):
    """Its fernet keys broken, keystone still answers GET /v3 (the old check said
    healthy) but issues no token: its check fails. The keys are declared (the
    operator folder's): the next deploy writes them back, and the same container
    issues tokens again."""
    env = cloud
    keystone = docker_client.containers.get(env.name("keystone"))
    keystone.exec_run(["sh", "-c", "for key in /etc/keystone/fernet-keys/*; do echo broken > $key; done"])
    assert keystone.exec_run(["kolla_check", "http-unix", "/var/lib/keystone/uwsgi.sock", "/v3", "200"]).exit_code == 0
    check = keystone.exec_run(["kolla_keystone_check"])
    assert check.exit_code == 1 and b"issuing a token" in check.output, check.output
    out = env.run("deploy").stdout
    assert f"volume {env.name('keystone_fernet_keys')}: keys written" in out, out
    assert docker_client.containers.get(env.name("keystone")).id == keystone.id
    assert keystone.exec_run(["kolla_keystone_check"]).exit_code == 0


def test_destroy_with_volumes_then_deploy_gives_a_working_keystone(cloud, docker_client):
    env = cloud
    env.run("destroy", "--remove-volumes", "--yes-i-really-mean-it")
    with pytest.raises(docker.errors.NotFound):
        docker_client.volumes.get(env.name("mariadb"))
    history = json.loads(env.run("history", "keystone", "--format", "json").stdout)
    assert "running" not in [h["outcome"] for h in history]
    out = env.run("deploy").stdout
    for job in ("keystone_database", "keystone_db_expand", "keystone_bootstrap", "keystone_db_contract"):
        assert f"ran {env.name(job)}" in out, job
    assert env.openstack("token", "issue", "-c", "id").strip()
