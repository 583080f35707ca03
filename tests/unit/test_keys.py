"""Keystone's key repositories (kolla_salt.operations.keys) and keystone on several hosts: the
same keys for every keystone host, rotation that stages a key before using it, the
database jobs on one host, every memcached in its config."""
import os

import pytest

from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.errors import KollaError, ValidationError
from kolla_salt.operations import keys
from test_loadbalancer import operator_folder

HOSTS = {"host1": "198.18.0.11", "host2": "198.18.0.12", "host3": "198.18.0.13"}


def test_keys_are_owned_by_the_uid_their_image_gives_its_user_and_an_unknown_owner_is_refused(tmp_path, monkeypatch):
    assert keys.declared()["keystone"]["fernet"]["owner"] == 42425   # images/keystone/image.yml's user
    (tmp_path / "memo").mkdir()
    (tmp_path / "memo" / "keys.yaml").write_text("tokens: {volume: memo_keys, owner: nosuchimage}\n")
    monkeypatch.setattr(keys.paths, "SERVICES_DIR", tmp_path)
    with pytest.raises(ValidationError) as refused:
        keys.declared()
    assert refused.value.problems[0].startswith("salt/states/kolla/memo/keys.yaml: key 'tokens' needs volume (a "
                                                "name) and owner (an image whose image.yml names its user: ")


def test_a_rotation_makes_the_staged_key_primary_stages_a_new_one_and_keeps_the_newest():
    first = keys.new_repository()
    second = keys.rotated(first, keep=3)
    assert second["2"] == first["0"] and second["1"] == first["1"]   # staged -> primary; old primary kept
    assert second["0"] not in first.values() and keys.valid_key(second["0"])
    third = keys.rotated(second, keep=3)
    # Every host that has `second` can read what a host with `third` encrypts (its
    # primary, 3, was staged in `second`), and the reverse (2 is still in `third`).
    assert third["3"] == second["0"] and third["2"] == second["2"]
    assert sorted(third, key=int) == ["0", "2", "3"]   # key 1 is gone: 3 kept
    assert keys.digest(third) != keys.digest(second)


def test_a_repository_is_saved_whole_or_not_at_all_and_a_bad_one_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "keys" / "keystone" / "fernet"
    with pytest.raises(ValidationError, match="fernet: missing; run `kolla-salt genpwd`"):
        keys.load(path)
    first = keys.new_repository()
    keys.save(path, first)
    assert keys.load(path) == first
    assert oct(path.stat().st_mode & 0o777) == "0o700" and oct((path / "0").stat().st_mode & 0o777) == "0o600"
    # A save killed after moving the old repository aside, before the new one took its place:
    second = keys.rotated(first, 3)
    keys.save(path, second)
    os.rename(path, path.with_name(".fernet.new"))
    assert keys.load(path) == second
    # ... and one killed while writing the new one: the old stays.
    (path.with_name(".fernet.new")).mkdir()
    assert keys.load(path) == second and not path.with_name(".fernet.new").exists()
    (path / "7").write_text("not a key")
    (path / "notes").write_text(first["0"])
    with pytest.raises(ValidationError) as error:
        keys.load(path)
    assert error.value.problems == [f"{path / '7'}: not a fernet key (32 bytes, URL-safe base64)",
                                    f"{path / 'notes'}: not a key's index (a key repository holds files 0, 1, 2, ...)"]
    assert first["0"] not in str(error.value)


def pillars(folder, **globals_):
    operator_folder(folder, network_interface="eth0", enable_haproxy=True, enable_keepalived=True,
                    kolla_internal_vip_address="198.18.0.10", **globals_)
    return {host: {s["name"]: s for s in build_pillar(folder, minion_id=host, interfaces={"eth0": [address]},
                                                       peer_interfaces={h: {"eth0": [a]} for h, a in HOSTS.items()}
                                                       )["kolla"]["services"]}
            for host, address in HOSTS.items()}


def test_keystone_on_every_control_host_gets_the_same_keys_and_one_host_changes_the_database(tmp_path):
    found = pillars(tmp_path, roles={"control": ["host*"], "compute": ["host3"]})
    repositories = [found[host]["keystone"]["keys"] for host in HOSTS]
    assert repositories[0] == repositories[1] == repositories[2]
    assert [(r["volume"], r["replace"]) for r in repositories[0]] == [
        ("t-keystone_fernet_keys", True), ("t-keystone_credential_keys", False)]
    assert repositories[0][0]["keys"] == keys.load(tmp_path / "keys" / "keystone" / "fernet")
    jobs = {host: [j["name"] for j in found[host]["keystone"]["jobs"] + found[host]["keystone"]["post_jobs"]]
            for host in HOSTS}
    assert jobs == {"host1": ["t-keystone_database", "t-keystone_db_expand", "t-keystone_bootstrap"],
                    "host2": [], "host3": ["t-keystone_db_contract"]}
    conf = found["host2"]["keystone"]["containers"][0]["files"]["keystone.conf"]
    assert "memcache_servers = 198.18.0.11:11211,198.18.0.12:11211,198.18.0.13:11211" in conf
    glance = found["host2"]["glance"]["containers"][0]["files"]["glance-api.conf"]
    assert "memcached_servers = 198.18.0.11:11211,198.18.0.12:11211,198.18.0.13:11211" in glance
    haproxy = found["host3"]["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    backend = haproxy.split("\nbackend keystone")[1].split("\nbackend ")[0]
    assert [line.split()[2].split(":")[0] for line in backend.splitlines() if line.strip().startswith("server ")] == [
        "198.18.0.11", "198.18.0.11", "198.18.0.12", "198.18.0.12", "198.18.0.13", "198.18.0.13"]


def test_a_host_without_keystone_gets_no_keys(tmp_path):
    found = pillars(tmp_path, roles={"control": ["host1"], "compute": ["host2", "host3"]})
    assert found["host1"]["keystone"]["keys"][0]["keys"]
    assert all("keystone" not in found[host] for host in ("host2", "host3"))
    assert all(not service["keys"] for host in ("host2", "host3") for service in found[host].values())


def test_rotate_keys_rotates_only_once_every_host_holds_the_current_keys(tmp_path):
    """"Distribute before use": while one host's volume lacks the current keys nothing
    is rotated, and the refusal names that host; once each holds them, keystone's
    fernet keys rotate (its credential keys never do) and only keystone's services
    are what the rotation deploys."""
    fernet = keys.repository_path(tmp_path, "keystone", "fernet")
    keys.save(fernet, keys.new_repository())
    keys.save(keys.repository_path(tmp_path, "keystone", "credential"), keys.new_repository())
    current = keys.digest(keys.load(fernet))
    placed = {"keystone": ["host1", "host2"], "memcached": ["host1"]}
    asked = []

    def held(behind):
        def digests(hosts, volume):
            asked.append(volume)
            return {host: "other" if host in behind else current for host in hosts}
        return digests

    with pytest.raises(KollaError) as refused:
        keys.rotate(tmp_path, "kst_", placed, held({"host2"}))
    assert "not rotated: host2 do(es) not hold these keys in kst_keystone_fernet_keys" in str(refused.value)
    assert keys.digest(keys.load(fernet)) == current
    staged = keys.load(fernet)["0"]
    said = keys.rotate(tmp_path, "kst_", placed, held(set()))
    assert said == [f"{fernet}: key 2 is the primary one now, a new key is staged, 3 kept"]
    assert keys.load(fernet)["2"] == staged and set(asked) == {"kst_keystone_fernet_keys"}
    assert keys.rotating_services(placed) == ["keystone"]
