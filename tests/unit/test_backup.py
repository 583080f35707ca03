"""kolla_salt.operations.backup's checks on files (the backups themselves are taken and restored
by tests/functional/test_aio.py)."""
import datetime
import hashlib
import json

import pytest
from operator_files import write_secrets

from kolla_salt.operations.backup import (Backups, back_first, restore_stops, data_secrets, database_parts, due,
                                          forgotten, host_releases, key_values, release_problems, rollback_plan,
                                          secret_problems)
from kolla_salt.errors import ValidationError


def operator_folder(tmp_path):
    """passwords.yml and the key repositories `genpwd` makes; one known password."""
    config = tmp_path / "config"
    config.mkdir()
    write_secrets(config, lambda key: "old-pw" if key == "database_password" else f"pw-{key}")
    return config


def a_backup(directory, name, archive=b"stream", releases=None, secrets=None):
    folder = directory / name
    folder.mkdir(parents=True)
    (folder / "mariadb.xb.gz").write_bytes(archive)
    (folder / "secrets.tar").write_bytes(b"tar")
    manifest = {"name": name, "kind": "full", "releases": releases or {}, "secrets": secrets or {},
                "archive": {"file": "mariadb.xb.gz", "bytes": len(archive),
                            "sha256": hashlib.sha256(archive).hexdigest()},
                "secrets_archive": {"file": "secrets.tar", "bytes": 3, "sha256": hashlib.sha256(b"tar").hexdigest()}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_the_data_secrets_are_the_passwords_and_keystones_credential_keys_not_its_token_keys(tmp_path):
    config = operator_folder(tmp_path)
    secrets = data_secrets(config)
    assert list(secrets["keys"]) == ["keys/keystone/credential/0", "keys/keystone/credential/1"]
    assert "database_password" in secrets["passwords"] and "old-pw" not in json.dumps(secrets)


def test_a_partial_backup_is_not_listed_and_a_corrupt_or_unknown_one_is_refused_by_name(tmp_path):
    backups = Backups(tmp_path / "backups")
    a_backup(backups.directory, "20261128T100000Z")
    a_backup(backups.directory, "20261128T110000Z.partial")
    assert [m["name"] for m in backups.list()] == ["20261128T100000Z"]
    assert backups.find("20261128T100000Z")["name"] == "20261128T100000Z"
    with pytest.raises(ValidationError, match="no such backup .* backups: 20261128T100000Z"):
        backups.find("20261128T110000Z")
    with pytest.raises(ValidationError, match="no such backup"):
        backups.find("../20261128T100000Z")
    (backups.directory / "20261128T100000Z" / "mariadb.xb.gz").write_bytes(b"streaM")
    with pytest.raises(ValidationError, match="mariadb.xb.gz: its size or sha256 differs"):
        backups.find("20261128T100000Z")
    (backups.directory / "20261128T100000Z" / "mariadb.xb.gz").write_bytes(b"stream")
    (backups.directory / "20261128T100000Z" / "secrets.tar").unlink()
    with pytest.raises(ValidationError, match="secrets.tar: missing: backup 20261128T100000Z is partial"):
        backups.find("20261128T100000Z")


def test_a_backup_directory_that_cannot_be_made_is_refused_naming_the_key(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValidationError, match="mariadb_backup_directory: .*file/backups cannot be made"):
        Backups(tmp_path / "file" / "backups").writable()


def test_a_restore_under_other_releases_or_other_secrets_is_refused_naming_them(tmp_path):
    config = operator_folder(tmp_path)
    manifest = {"name": "b", "releases": {"keystone": "2026.1", "nova_api": "2026.1"}, "secrets": data_secrets(config)}
    assert release_problems(manifest, {"keystone": "2026.1", "nova_api": "2026.1", "glance_api": "2026.2"}) == []
    assert secret_problems(manifest, config, tmp_path / "b") == []
    (config / "keys" / "keystone" / "fernet" / "9").write_text("a rotated token key: no matter")
    manifest["secrets"]["passwords"].pop("glance_database_password")   # a password added since: no matter
    assert secret_problems(manifest, config, tmp_path / "b") == []
    (config / "keys" / "keystone" / "credential" / "2").write_text("a new key")
    (config / "passwords.yml").write_text((config / "passwords.yml").read_text().replace("old-pw", "rotated"))
    [releases] = release_problems(manifest, {"keystone": "2026.1", "nova_api": "2026.2"})
    assert "nova_api: 2026.1 then, 2026.2 now" in releases and "keystone" not in releases
    [secrets] = secret_problems(manifest, config, tmp_path / "b")
    assert "passwords.yml: database_password, keys/keystone/credential/2 differ" in secrets, secrets
    assert "secrets.tar" in secrets and "rotated" not in secrets


def test_mariabackups_info_files_are_read_as_keys_and_values():
    assert key_values("backup_type = full-backuped\nto_lsn = 1234\nbinlog_pos = \nnoise\n") == {
        "backup_type": "full-backuped", "to_lsn": "1234", "binlog_pos": ""}


def test_the_writers_are_the_containers_of_services_whose_jobs_fill_the_database():
    """What a restore stops, per host: the containers of services with a job that fills
    the database volume (keystone here), also on a host where that job does not run
    (run_once); memcached keeps running; the member is mariadb's container that holds
    the datadir, not its clustercheck."""
    def service(name, containers, fills=()):
        return {"name": name, "containers": [{"spec": spec} for spec in containers], "post_jobs": [],
                "jobs": [{"name": f"{name}_db_sync", "fills": list(fills)}] if fills else [], "fills": list(fills)}
    services = [service("mariadb", [{"name": "kst_mariadb_clustercheck"},
                                    {"name": "kst_mariadb", "volumes": ["kst_mariadb:/var/lib/mysql"]}]),
                service("memcached", [{"name": "kst_memcached"}]),
                service("keystone", [{"name": "kst_keystone"}, {"name": "kst_keystone_ssh"}], fills=["kst_mariadb"])]
    assert database_parts(services, "kst_") == ("kst_mariadb", ["kst_keystone", "kst_keystone_ssh"],
                                                ["keystone_db_sync"])
    assert database_parts(services[1:], "kst_")[0] is None   # a host without a member: its writers all the same
    services[2]["jobs"] = []   # keystone's job runs on another host
    assert database_parts(services, "kst_")[1:] == (["kst_keystone", "kst_keystone_ssh"], [])


def test_a_release_rollback_stops_first_what_the_upgrade_took_forward_after_every_writer():
    """The compute set (deploy order after nova, the last service filling the database)
    stops before the writers where it runs a newer release (libvirt's image here does
    not change with the release), last first; ovn, before nova in deploy order, keeps
    running; where nothing writes to the database nothing stops first."""
    services = [{"name": name, "fills": ["kst_mariadb"] if name in ("keystone", "nova") else [],
                 "containers": [{"spec": {"name": f"kst_{name}", "volumes": [f"kst_{name}:/var/lib/mysql"]}}],
                 "jobs": [], "post_jobs": []}
                for name in ("mariadb", "keystone", "ovn", "nova", "libvirt", "nova_compute")]
    ahead = {"kst_keystone", "kst_ovn", "kst_nova", "kst_nova_compute"}
    assert back_first(services, "kst_", ahead) == ["nova_compute"]
    assert back_first(services, "kst_", ahead | {"kst_libvirt"}) == ["libvirt", "nova_compute"]
    assert back_first(services, "other_", ahead) == []
    assert restore_stops(services, "kst_", ["libvirt", "nova_compute"]) == [
        "kst_nova_compute", "kst_libvirt", "kst_nova", "kst_keystone"]
    assert restore_stops(services, "kst_") == ["kst_nova", "kst_keystone"]
    # A cache of the database's rows stops after the writers (and starts before them, empty).
    cache = {"name": "memcached", "caches_database": True, "containers": [{"spec": {"name": "kst_memcached"}}],
             "jobs": [], "post_jobs": []}
    assert restore_stops([services[0], cache] + services[1:], "kst_") == ["kst_nova", "kst_keystone",
                                                                          "kst_memcached"]


def test_a_release_rollback_puts_back_the_newest_backup_taken_under_that_release_and_refuses_without_one():
    """The CLI and kolla.rollback_release choose alike: of every member's backups, the
    newest that fits every container at the older release (one taken after the
    upgrade holds newer schemas); what the upgrade took forward after every writer
    stops first; nothing newer running, or no backup under the release, is refused
    before anything changes, naming the hosts."""
    def taken(name, when, release):
        return {"name": name, "taken": when, "releases": {"host1:kst_keystone": release}}
    kept = {"host1": [taken("A", "2026-12-07T10:00:00+00:00", "2026.1")],
            "host3": [taken("B", "2026-12-07T11:00:00+00:00", "2026.1"),
                      taken("C", "2026-12-07T12:00:00+00:00", "2026.2")]}
    running = {"host1:kst_keystone": "2026.2", "host2:kst_nova_compute": "2026.2"}
    services = [{"name": name, "fills": ["kst_mariadb"] if name == "keystone" else [],
                 "containers": [{"spec": {"name": f"kst_{name}"}}]} for name in ("mariadb", "keystone", "nova_compute")]
    assert rollback_plan(kept, running, "2026.1", services, "kst_") == {
        "host": "host3", "backup": "B", "first": ["nova_compute"]}
    with pytest.raises(ValidationError) as refused:
        rollback_plan({"host1": kept["host1"][:0], "host3": kept["host3"][1:]}, running, "2026.1", services, "kst_")
    assert "no backup on host1, host3 was taken under 2026.1" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        rollback_plan(kept, dict.fromkeys(running, "2026.1"), "2026.1", services, "kst_")
    assert "nothing runs a release newer than 2026.1" in str(refused.value)


def test_a_backup_kept_through_a_master_is_whole_without_its_secrets_beside_it(tmp_path):
    """Through a master secrets.tar stays on the master: the member's host checks the
    archive alone."""
    folder = a_backup(tmp_path, "20261128T000000Z")
    (folder / "secrets.tar").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "secrets_archive": None}))
    assert Backups(tmp_path).find("20261128T000000Z")["name"] == "20261128T000000Z"


def test_the_schedule_is_due_when_no_backup_of_any_kind_is_younger_than_its_interval():
    manifests = [{"taken": "2026-11-28T10:00:00+00:00"}, {"taken": "2026-11-28T11:00:00+00:00"}]
    at = datetime.datetime(2026, 11, 28, 11, 30, tzinfo=datetime.timezone.utc).timestamp()
    assert not due(manifests, 60, now=at) and due(manifests, 30, now=at) and due([], 60, now=at)


def test_pruning_removes_only_scheduled_backups_beyond_those_kept_and_never_a_base_kept(tmp_path):
    """Of the schedule's backups the newest `kept` stay; one an incremental starts from
    stays as well; a backup taken for another reason (before an upgrade) always stays."""
    def backup(name, why, **extra):
        folder = a_backup(tmp_path, name)
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "why": why, **extra}))
    backup("20261128T010000Z", "scheduled (mariadb_backup_interval_minutes: 60)")
    backup("20261128T020000Z", "before the upgrade to 2026.2 (kolla-salt upgrade)")
    backup("20261128T030000Z", "scheduled (mariadb_backup_interval_minutes: 60)")
    backup("20261128T033000Z", "asked (kolla-salt mariadb-backup)", kind="incremental", base="20261128T030000Z")
    backup("20261128T040000Z", "scheduled (mariadb_backup_interval_minutes: 60)")
    backup("20261128T050000Z", "scheduled (mariadb_backup_interval_minutes: 60)")
    assert Backups(tmp_path).prune(1) == ["20261128T010000Z", "20261128T040000Z"]
    assert [m["name"] for m in Backups(tmp_path).list()] == [
        "20261128T020000Z", "20261128T030000Z", "20261128T033000Z", "20261128T050000Z"]


def test_a_masters_backup_keys_releases_by_host_and_container_leaving_out_silent_hosts():
    facts = {"host2": {"releases": {"keystone": "2026.2"}}, "host1": {"releases": {"keystone": "2026.1"}},
             "host3": None}
    assert host_releases(facts) == {"host1:keystone": "2026.1", "host2:keystone": "2026.2"}


def test_a_restore_names_what_it_forgets_made_since_the_backup_as_each_service_folder_asks():
    """nova's folder asks for the servers made since the backup (its restore_forgets):
    the query runs in the member with the backup's time in UTC; a query that names
    nothing, or fails (no such database), says nothing."""
    from kolla_salt.declaration.inventory import restore_forgets

    class Result:
        def __init__(self, code, text):
            self.exit_code, self.output = code, text.encode()

    class Member:
        asked = []

        def exec_run(self, command):
            sql = command[-1]
            self.asked.append(sql)
            if "nova.instances" in sql:
                return Result(0, "kst-one (1-2)\nkst-two (3-4)\n")
            return Result(1, "ERROR 1049: Unknown database 'glance'") if "glance" in sql else Result(0, "")
    problems = []
    declared = {"servers": {"query": "SELECT name FROM nova.instances WHERE created_at > '{taken}'",
                            "why": "would run on unknown to nova"}}
    services = [{"name": "nova", "restore_forgets": restore_forgets(declared, "nova", problems)},
                {"name": "glance", "restore_forgets": {"images": {"query": "SELECT 1 FROM glance.x WHERE t > '{taken}'",
                                                                  "why": "-"}}},
                {"name": "placement", "restore_forgets": {"none": {"query": "SELECT 1 WHERE '{taken}' > 0",
                                                                   "why": "-"}}},
                {"name": "keystone"}]
    manifest = {"taken": "2026-11-28T23:32:31+01:00"}
    assert forgotten(Member(), services, manifest) == {
        "servers": ("would run on unknown to nova", ["kst-one (1-2)", "kst-two (3-4)"])}
    assert "created_at > '2026-11-28 22:32:31'" in Member.asked[0] and problems == []
    restore_forgets({"servers": {"query": "SELECT 1", "why": "x"}, "ports": "SELECT"}, "nova: restore_forgets",
                    problems)
    assert problems == ["nova: restore_forgets.servers: expected query (SQL with {taken}) and why",
                        "nova: restore_forgets.ports: expected query (SQL with {taken}) and why"]
