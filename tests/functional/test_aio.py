"""The all-in-one control plane, used through the real python-openstackclient."""
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import IMAGES, KOLLA, EngineEvents, docker_verdict

pytestmark = pytest.mark.functional
SERVICES = ("cron", "mariadb", "rabbitmq", "memcached", "keystone")


@pytest.fixture(scope="module")
def aio(tmp_path_factory, docker_client, built_images):
    """One deployed AIO cloud shared by the tests of this module (deploying takes a minute)."""
    from conftest import KollaEnv
    built_images("cron", "mariadb", "rabbitmq", "memcached", "keystone", "toolbox")
    env = KollaEnv(tmp_path_factory.mktemp("aio"), "kstaio-")
    env.cleanup(docker_client)
    # The health loop as deploy starts it, with a short interval to keep the test short.
    env.write_globals(enable_health_loop=True, health_check_interval=1, health_failure_threshold=2, enable_cron=True)
    events = EngineEvents(docker_client)
    env.deploy_output = env.run("deploy").stdout
    env.deploy_events = events.stop()
    yield env
    env.cleanup(docker_client)


def started_at(docker_client, env):
    return {s: docker_client.containers.get(env.name(s)).attrs["State"]["StartedAt"] for s in SERVICES}


def test_the_real_client_issues_tokens_and_manages_projects_and_users(aio):
    assert aio.openstack("token", "issue", "-c", "id").strip()
    aio.openstack("project", "create", "--domain", "default", "kst-project")
    aio.openstack("user", "create", "--domain", "default", "--project", "kst-project",
              "--password", "kst-user-pw", "kst-user")
    assert "kst-project" in aio.openstack("project", "list", "-c", "Name").split()
    assert "kst-user" in aio.openstack("user", "list", "-c", "Name").split()


def test_every_container_is_healthy_in_its_set(aio, docker_client):
    sets = {"cron": "common/cron", "mariadb": "database-control/mariadb", "rabbitmq": "messaging-control/rabbitmq",
            "memcached": "cache-control/memcached", "keystone": "openstack-interface/keystone"}
    for service, set_path in sets.items():
        container = docker_client.containers.get(aio.name(service))
        assert container.labels["kolla.set"] == set_path
        # The deploy already saw its check pass through docker exec; Docker says so at
        # its own first run of it.
        assert docker_verdict(container) == "healthy", (service, container.attrs["State"].get("Health"))
    status = aio.run("status").stdout
    order = ["common", "database-control", "messaging-control", "openstack-interface"]
    assert [status.index(name) for name in order] == sorted(status.index(name) for name in order)


def test_a_first_deploy_starts_each_service_once_what_it_waits_for_passes_and_the_rest_side_by_side(aio):
    """tree.yaml's `after`: keystone's first job or container is made only once the
    services it waits for (the database, memcached) passed a check; and a service
    that waits for nothing unfinished starts before a service earlier in the tree
    has passed its first check (memcached or RabbitMQ beside the database), which
    the tree's order one service at a time would never do."""
    from kolla_salt.declaration.tree import service_order, waits
    order = [service for _, service in service_order() if service in SERVICES]
    waited = waits(order)
    events = aio.deploy_events
    made = {s: events.first("create", aio.name(s)) for s in order}   # its first container or job
    passed = {s: events.first("exec_die", aio.name(s), exit_code=0) for s in order}
    for service in order:
        for other in waited[service]:
            assert made[service] > passed[other], (service, other, made, passed)
    side_by_side = [(later, earlier) for i, later in enumerate(order) for earlier in order[:i]
                    if earlier not in waited[later] and passed[earlier] and made[later] < passed[earlier]]
    assert side_by_side, (made, passed)


def test_deploy_starts_the_health_loop_which_restarts_a_hung_service(aio, docker_client):
    """A container that fails its check is restarted, with nothing started by hand."""
    import time
    assert "health loop: started" in aio.deploy_output
    assert "health loop: running" in aio.run("status").stdout
    memcached = docker_client.containers.get(aio.name("memcached"))
    before = memcached.attrs["State"]["StartedAt"]
    assert memcached.exec_run(["sh", "-c", "kill -STOP $(pidof memcached)"]).exit_code == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        memcached.reload()
        if memcached.attrs["State"]["StartedAt"] != before and memcached.exec_run(
                ["kolla_check", "memcached", f"127.0.0.1:{aio.globals['memcached_port']}"]).exit_code == 0:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the frozen memcached was not restarted within 60 s")
    assert "(health loop restarts: 1)" in aio.run("status").stdout


def test_secrets_stay_secret(aio):
    passwords = aio.passwords()
    for path in ("passwords.yml", "clouds.yaml", "admin-openrc.sh"):
        assert stat.S_IMODE((aio.config_dir / path).stat().st_mode) == 0o600, path
    for secret in passwords.values():
        assert secret not in aio.deploy_output
    logs = [Path("/var/log/kolla-salt/salt-minion.log"), aio.root / "state" / "salt" / "health" / "minion.log"]
    for log in logs:
        if log.exists():
            text = log.read_text(errors="replace")
            assert not any(secret in text for secret in passwords.values()), log


def test_second_deploy_reports_zero_changes(aio, docker_client):
    before = started_at(docker_client, aio)
    out = aio.run("deploy").stdout
    assert " 0 changed, 0 failed" in out
    assert started_at(docker_client, aio) == before


def test_override_reconfigures_keystone_only(aio, docker_client):
    before = started_at(docker_client, aio)
    generation = int(docker_client.containers.get(aio.name("keystone")).labels["kolla.generation"])
    override = aio.config_dir / "config" / "keystone"
    override.mkdir(parents=True)
    (override / "keystone.conf").write_text("[DEFAULT]\ndebug = True\n[token]\nexpiration = 7200\n")
    aio.run("deploy")
    keystone = docker_client.containers.get(aio.name("keystone"))
    conf = keystone.exec_run(["cat", "/etc/keystone/keystone.conf"]).output.decode()
    assert "debug = True" in conf and "expiration = 7200" in conf and "provider = fernet" in conf
    assert int(keystone.labels["kolla.generation"]) == generation + 1
    after = started_at(docker_client, aio)
    assert after["keystone"] != before["keystone"]
    assert {s: after[s] for s in SERVICES if s != "keystone"} == {s: before[s] for s in SERVICES if s != "keystone"}
    assert aio.openstack("token", "issue", "-c", "id").strip()


def test_invalid_operator_files_are_refused_naming_the_key(aio, docker_client):
    before = started_at(docker_client, aio)
    aio.write_globals(enable_keystone="maybe")
    proc = aio.run("deploy", check=False)
    aio.write_globals(enable_keystone=True)
    assert proc.returncode == 2
    assert "globals.yml: key 'enable_keystone' must be true/false, got 'maybe'" in proc.stderr

    broken = aio.config_dir / "config" / "memcached"
    broken.mkdir(parents=True)
    (broken / "memcached.conf").write_text("x\n")
    bad_ini = aio.config_dir / "config" / "keystone" / "keystone.conf"
    bad_ini.parent.mkdir(parents=True, exist_ok=True)
    saved = bad_ini.read_text() if bad_ini.exists() else None
    bad_ini.write_text("[DEFAULT]\nno equals sign here\n")
    proc = aio.run("validate", check=False)
    assert proc.returncode == 2
    assert f"{bad_ini}:2: expected 'key = value'" in proc.stderr
    assert f"{broken / 'memcached.conf'}: memcached has no config file 'memcached.conf'" in proc.stderr
    (broken / "memcached.conf").unlink()
    if saved is None:
        bad_ini.unlink()
    else:
        bad_ini.write_text(saved)
    assert started_at(docker_client, aio) == before


def test_failed_upgrade_brings_the_old_keystone_back(aio, docker_client, tmp_path):
    """An image whose health check never passes: the swap fails, generation N is back, data intact."""
    import io
    good = docker_client.containers.get(aio.name("keystone"))
    # Its check never passes; its jobs still work.
    dockerfile = (f"FROM {good.image.tags[0]}\n"
                  "RUN printf '#!/bin/sh\\necho never healthy\\nexit 1\\n' > /usr/local/bin/kolla_keystone_check\n")
    broken_tag = f"{aio.prefix}broken"
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()),
                                          tag=f"{IMAGES}/keystone:{broken_tag}", rm=True, forcerm=True)
    try:
        aio.write_globals(keystone_tag=broken_tag, container_health_timeout=15)
        proc = aio.run("upgrade", "--services", "keystone", check=False)
        assert proc.returncode == 1
        generation = int(good.labels["kolla.generation"])
        assert (f"{aio.name('keystone')}: generation {generation + 1} failed" in proc.stdout
                and f"restored generation {generation}" in proc.stdout), proc.stdout
        back = docker_client.containers.get(aio.name("keystone"))
        assert back.id == good.id and back.labels["kolla.generation"] == str(generation)
        # swap: overlap: the new generation ran beside it, so it never stopped serving.
        assert back.attrs["State"]["StartedAt"] == good.attrs["State"]["StartedAt"]
        assert "(it kept serving)" in proc.stdout
        assert back.attrs["HostConfig"]["RestartPolicy"]["Name"] == "always"
        assert "kst-project" in aio.openstack("project", "list", "-c", "Name").split()
        # Back on the good tag, the restored container is what Salt wants: nothing to do.
        aio.write_globals(keystone_tag="", container_health_timeout=None)
        redeploy = aio.run("deploy").stdout
        assert " 0 changed, 0 failed" in redeploy, redeploy
    finally:
        aio.write_globals(keystone_tag="", container_health_timeout=None)
        docker_client.images.remove(image.id, force=True)


def test_logs_from_the_cli_and_in_the_host_log_folder(aio, docker_client):
    """`logs` shows a container's output, its last lines, followed too, with the
    passwords a service prints blanked out; the log files are in the host's folder."""
    out = aio.run("logs", "keystone", "--tail", "3").stdout
    assert 0 < len(out.splitlines()) <= 3
    assert aio.run("logs", aio.name("keystone")).stdout.count("\n") >= len(out.splitlines())
    assert "keystone" in (aio.root / "log" / "keystone" / "keystone.log").read_text()
    assert (aio.root / "log" / "mariadb" / "mariadb.log").exists() and (aio.root / "log" / "rabbitmq").is_dir()
    # memcached writes only to stderr: it is in `logs` and in its folder alike.
    memcached_log = (aio.root / "log" / "memcached" / "memcached.log").read_text()
    assert "slab class" in memcached_log and "slab class" in aio.run("logs", "memcached").stdout
    assert aio.run("logs", "nosuch", check=False).returncode != 0

    # A service that prints a password (into its container's output, as a debug log would).
    secret = aio.passwords()["keystone_admin_password"]
    said = docker_client.containers.get(aio.name("keystone")).exec_run(
        ["sh", "-c", f"echo kst-leak {secret} > /proc/1/fd/1"])
    assert said.exit_code == 0, said.output
    assert "kst-leak ********" in aio.run("logs", "keystone", "--tail", "20").stdout
    follower = subprocess.Popen([KOLLA, "--config-dir", str(aio.config_dir), "logs", "keystone", "--follow",
                                 "--tail", "20"], stdout=subprocess.PIPE, text=True)
    stop = threading.Timer(60, follower.kill)   # bounded: a follow ends only when ended
    stop.start()
    try:
        followed = next((line for line in follower.stdout if "kst-leak" in line), "")
    finally:
        stop.cancel()
        follower.kill()
        follower.wait()
    assert followed.strip() == "kst-leak ********", followed


def table_checksums(docker_client, env, tables=("keystone.project", "keystone.user", "keystone.local_user",
                                                 "keystone.assignment")):
    """CHECKSUM TABLE of keystone's tables, as the database holds them now."""
    done = docker_client.containers.get(env.name("mariadb")).exec_run(
        ["mariadb", "--defaults-file=/etc/mysql/kolla-client.cnf", "-N", "-e", f"CHECKSUM TABLE {', '.join(tables)}"])
    assert done.exit_code == 0, done.output
    return done.output.decode()


def test_a_restored_backup_brings_back_deleted_rows_and_the_cloud_answers(aio, docker_client):
    """`mariadb-backup` copies the database while it serves (into mariadb_backup_directory,
    every file 0600, with a manifest), `--incremental` what changed since; rows deleted
    afterwards come back with `mariadb-restore` of the incremental (its full backup, then
    it), which takes a backup of what it replaces first, restarts only the services
    that write to the database and memcached (a project made since, cached by keystone,
    is gone too), and leaves a declared state the next deploy keeps. A
    corrupt backup, one of another operator folder's secrets, an incremental without
    its base and an unknown name are refused before anything stops."""
    aio.openstack("project", "create", "--domain", "default", "kst-backed-up")
    aio.openstack("user", "create", "--domain", "default", "--project", "kst-backed-up", "--password", "kst-pw",
                  "kst-backed-up-user")
    before = table_checksums(docker_client, aio)
    taken = aio.run("mariadb-backup")
    name = taken.stdout.split("mariadb-restore ")[-1].split("`")[0]
    assert not any(secret in taken.stdout + taken.stderr for secret in aio.passwords().values())
    folder = aio.root / "state" / "mariadb-backups" / name
    for file in ("manifest.json", "mariadb.xb.gz", "secrets.tar"):
        assert stat.S_IMODE((folder / file).stat().st_mode) == 0o600, file
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["releases"][aio.name("keystone")] == aio.globals.get("openstack_release", "2026.1")
    assert manifest["position"]["to_lsn"]
    aio.openstack("project", "create", "--domain", "default", "kst-backed-up-since")
    before = table_checksums(docker_client, aio)
    since = aio.run("mariadb-backup", "--incremental").stdout.split("mariadb-restore ")[-1].split("`")[0]
    full, increment = (json.loads((folder.with_name(n) / "manifest.json").read_text()) for n in (name, since))
    assert increment["kind"] == "incremental" and increment["base"] == name
    assert int(increment["position"]["from_lsn"]) == int(full["position"]["to_lsn"])
    print(f"\nfull backup {full['archive']['bytes'] >> 10} KiB, incremental {increment['archive']['bytes'] >> 10} KiB "
          f"(mariabackup copies the non-InnoDB tables whole each time)")
    assert f"{since}\tincremental of {name}" in aio.run("mariadb-backup", "--list").stdout

    aio.openstack("user", "delete", "kst-backed-up-user", values=False)
    aio.openstack("project", "delete", "kst-backed-up", values=False)
    aio.openstack("project", "delete", "kst-backed-up-since", values=False)
    assert table_checksums(docker_client, aio) != before
    # Made after the backups and read, so keystone's cache (memcached) holds it too.
    made_after = aio.openstack("project", "create", "--domain", "default", "kst-made-after", "-c", "id").strip()
    assert aio.openstack("project", "show", made_after, "-c", "name").strip() == "kst-made-after"
    running = started_at(docker_client, aio)

    # Refused before anything changes: a name that is no backup, a corrupt archive, other secrets.
    unknown = aio.run("mariadb-restore", "nosuch", "--yes-i-really-mean-it", check=False)
    assert unknown.returncode == 2 and f"backups: {name}" in unknown.stderr, unknown.stderr
    corrupt = folder.with_name(name + "-corrupt")
    shutil.copytree(folder, corrupt)
    with open(corrupt / "mariadb.xb.gz", "r+b") as archive:
        archive.seek(100)
        archive.write(b"kst")
    refused = aio.run("mariadb-restore", corrupt.name, "--yes-i-really-mean-it", check=False)
    shutil.rmtree(corrupt)
    assert refused.returncode == 2 and "mariadb.xb.gz: its size or sha256 differs" in refused.stderr, refused.stderr
    orphan = folder.with_name(since + "-orphan")
    shutil.copytree(folder.with_name(since), orphan)
    (orphan / "manifest.json").write_text(json.dumps({**increment, "name": orphan.name, "base": "nosuch"}))
    refused = aio.run("mariadb-restore", orphan.name, "--yes-i-really-mean-it", check=False)
    shutil.rmtree(orphan)
    assert refused.returncode == 2 and "changed since backup nosuch, which is not whole" in refused.stderr, refused.stderr
    credential = sorted((aio.config_dir / "keys" / "keystone" / "credential").iterdir())[0]
    key = credential.read_bytes()
    credential.write_bytes(key + b"\n")
    try:
        refused = aio.run("mariadb-restore", name, "--yes-i-really-mean-it", check=False)
    finally:
        credential.write_bytes(key)
    assert refused.returncode == 2 and str(credential.relative_to(aio.config_dir)) in refused.stderr, refused.stderr
    asked = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "--config-dir", str(aio.config_dir),
                            "mariadb-restore", name], input="no\n", capture_output=True, text=True)
    assert asked.returncode == 1 and "mariadb-restore: nothing done" in asked.stdout
    assert started_at(docker_client, aio) == running

    restored = aio.run("mariadb-restore", since, "--yes-i-really-mean-it").stdout
    print(restored.splitlines()[-1])
    assert table_checksums(docker_client, aio) == before
    for project in ("kst-backed-up", "kst-backed-up-since"):
        assert aio.openstack("project", "show", project, "-c", "name").strip() == project
    assert aio.openstack("token", "issue", "-c", "id").strip()
    # Gone with the database, not served on from the cache of what it held.
    with pytest.raises(AssertionError, match=rf"(?i)no project\b.*{made_after}"):
        aio.openstack("project", "show", made_after)
    after = started_at(docker_client, aio)
    # Only the database, what writes to it and the cache of its rows went down.
    assert [s for s in SERVICES if after[s] != running[s]] == ["mariadb", "memcached", "keystone"]
    assert len(aio.run("mariadb-backup", "--list").stdout.splitlines()) == 4   # the heading, both, what it replaced
    assert " 0 changed, 0 failed" in aio.run("deploy", "--test").stdout


def test_scheduled_backups_are_taken_by_the_hosts_daemon_and_only_theirs_are_pruned(aio):
    """mariadb_backup_interval_minutes: the host's kolla-salt daemon takes a backup when
    the newest one is older than that, then removes the schedule's backups beyond
    mariadb_backups_kept (an earlier scheduled one here), never the others (those of
    the restore test). Setting it back to 0 ends the schedule."""
    import datetime
    directory = aio.root / "state" / "mariadb-backups"
    before = sorted(p.name for p in directory.iterdir() if p.is_dir())
    assert before, "the restore test's backups"
    for name in before:   # taken an hour earlier: the schedule is due at once, not a minute on
        path = directory / name / "manifest.json"
        manifest = json.loads(path.read_text())
        taken = datetime.datetime.fromisoformat(manifest["taken"]) - datetime.timedelta(hours=1)
        path.write_text(json.dumps({**manifest, "taken": taken.isoformat(timespec="seconds")}))
    earlier = directory / "20000101T000000Z"   # a scheduled backup of long ago
    shutil.copytree(directory / before[-1], earlier)
    manifest = json.loads((earlier / "manifest.json").read_text())
    (earlier / "manifest.json").write_text(json.dumps({
        **manifest, "name": earlier.name, "taken": "2000-01-01T00:00:00+00:00",
        "why": "scheduled (mariadb_backup_interval_minutes: 1)"}))
    aio.write_globals(mariadb_backup_interval_minutes=1, mariadb_backups_kept=1)
    try:
        assert "a database backup when the newest is 1 minutes old, 1 scheduled ones kept" in aio.run("deploy").stdout
        deadline = time.monotonic() + 180
        while earlier.exists():   # pruned once the new one is whole
            assert time.monotonic() < deadline, f"no scheduled backup in 180 s: {sorted(os.listdir(directory))}"
            time.sleep(2)
    finally:
        aio.write_globals(mariadb_backup_interval_minutes=0)
        aio.run("deploy")
    listed = aio.run("mariadb-backup", "--list").stdout
    assert sum("\tscheduled (mariadb_backup_interval_minutes: 1)" in line for line in listed.splitlines()) == 1, listed
    assert all(name in listed for name in before), listed


def test_rabbitmq_is_drained_before_an_upgrade_replaces_it(aio, docker_client):
    """An upgrade of rabbitmq (a new image: the built one plus a label) puts the old
    node in maintenance mode before stopping it, so its clients and queue leaders
    move before it goes; the new node starts out of maintenance (its check connects
    to AMQP) with the users its data volume holds."""
    name = aio.name("rabbitmq")
    old = docker_client.containers.get(name)
    tag = f"{IMAGES}/rabbitmq:kstaio-new"
    docker_client.images.build(fileobj=io.BytesIO(f"FROM {old.image.id}\nLABEL kolla.test=kstaio\n".encode()),
                               tag=tag, rm=True)
    try:
        aio.write_globals(rabbitmq_tag="kstaio-new")
        done = aio.run("upgrade", "--services", "rabbitmq")
        # Progress (salt-call's stderr): it ran, and did not fail.
        assert f"[kolla] {name}: rabbitmq-upgrade --timeout 25 drain\n" in done.stderr, done.stderr
        retired = docker_client.containers.get(f"{name}.gen{old.labels['kolla.generation']}")
        assert "This node is being put into maintenance (drain) mode" in retired.logs().decode(errors="replace")
        new = docker_client.containers.get(name)
        assert new.image.tags == [tag]
        check = new.attrs["Config"]["Healthcheck"]["Test"][1:]   # kolla_rabbitmq_check: its AMQP listener serves
        checked = new.exec_run(check)
        assert checked.exit_code == 0, (check, checked.output.decode(errors="replace"))
        assert "openstack" in new.exec_run(["rabbitmqctl", "-q", "list_users"]).output.decode()
    finally:
        aio.write_globals(rabbitmq_tag="")
        docker_client.images.remove(tag, force=True)   # the container keeps its image by id until destroy


def test_stop_then_destroy_keep_the_data_volumes(aio, docker_client):
    """Last in this module: it takes the cloud down."""
    aio.run("stop", "--services", "memcached")
    assert docker_client.containers.get(aio.name("memcached")).status == "exited"
    assert docker_client.containers.get(aio.name("keystone")).status == "running"

    refused = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "--config-dir", str(aio.config_dir), "destroy"],
                             input="no\n", capture_output=True, text=True)
    assert refused.returncode == 1 and "destroy: nothing done" in refused.stdout
    assert docker_client.containers.get(aio.name("keystone")).status == "running"

    out = aio.run("destroy", "--yes-i-really-mean-it").stdout
    assert "health loop stopped" in out
    left = [c.name for c in docker_client.containers.list(all=True) if c.name.startswith(aio.prefix)]
    assert left == []
    volumes = {v.name for v in docker_client.volumes.list() if v.name.startswith(aio.prefix)}
    assert {aio.name("mariadb"), aio.name("rabbitmq"), aio.name("keystone_fernet_keys")} <= volumes
    assert "health loop: not running" in aio.run("status").stdout
