"""pins.yml: the decisions of upgrade and rollback, kept in the declared state."""
import pytest

from kolla_salt.declaration.pins import Pins, changed, pin_facts
from kolla_salt.errors import ValidationError


def test_pins_round_trip_and_an_empty_file_is_removed(tmp_path):
    pins = Pins.load(tmp_path)
    assert pins.describe() == []
    pins.services["keystone"] = {"release": "2026.2"}
    pins.containers["keystone"] = {"generation": 5, "why": "rollback to generation 3"}
    pins.save()
    again = Pins.load(tmp_path, {"keystone"}, {"2026.2"})
    assert again.release_of("keystone") == "2026.2" and again.release_of("mariadb") is None
    assert again.generation_of("keystone") == 5
    assert again.describe() == ["keystone follows release 2026.2",
                                "keystone held at what generation 5 ran (rollback to generation 3)"]
    again.services.clear()
    again.containers.clear()
    again.save()
    assert not (tmp_path / "pins.yml").exists()


def test_a_bad_pin_is_refused_naming_its_key(tmp_path):
    (tmp_path / "pins.yml").write_text(
        "services:\n  keystone: {release: '1999.1'}\n  nova: {release: '2026.1'}\n"
        "containers:\n  keystone: {generation: zero}\ncolour: red\n")
    with pytest.raises(ValidationError) as error:
        Pins.load(tmp_path, {"keystone"}, {"2026.1"})
    text = str(error.value)
    for expected in ("services.keystone.release must be a known release, got '1999.1'",
                     "services.nova: no service is called 'nova'",
                     "containers.keystone.generation must be a generation number, got 'zero'",
                     "unknown key 'colour'"):
        assert expected in text
    assert str(tmp_path / "pins.yml") in text


def test_a_password_changed_under_a_held_container_is_refused_naming_the_key(tmp_path):
    """A rollback records fingerprints of the passwords the held container uses (not
    the passwords); a deploy refuses a changed one, naming the passwords.yml key (the
    one a derived password comes from) and the pin."""
    from kolla_salt.declaration.inventory import held_password_problems
    from kolla_salt.declaration.pins import changed, fingerprints
    used = {"keystone_database_password": "db-secret-1", "keystone_health_password": "health-secret-1"}
    recorded = fingerprints(used)
    assert not any(secret in str(recorded) for secret in used.values())
    assert changed(recorded, used) == []
    pins = Pins(tmp_path / "pins.yml", containers={
        "host1:kst-keystone": {"generation": 3, "why": "rollback, 2026-11-27 23:28 UTC", "passwords": recorded}})
    now = {**used, "keystone_health_password": "health-secret-2", "nova_database_password": "other"}
    assert held_password_problems(pins, "kst-keystone", used, "host1", tmp_path) == []
    assert held_password_problems(pins, "kst-keystone", now, "host2", tmp_path) == []   # held on host1 only
    assert held_password_problems(pins, "kst-keystone", now, "host1", tmp_path) == [
        f"{tmp_path / 'passwords.yml'}: key 'keystone_admin_password' changed since pins.yml held "
        "host1:kst-keystone at what generation 3 ran (rollback, 2026-11-27 23:28 UTC); that generation's config "
        "files keep the old password: put the old one back, or `kolla-salt unpin host1:kst-keystone` to let it "
        "follow the files"]
    (tmp_path / "pins.yml").write_text("containers:\n  keystone: {generation: 3, passwords: {a: not-a-fingerprint}}\n")
    with pytest.raises(ValidationError) as error:
        Pins.load(tmp_path)
    assert "containers.keystone.passwords must map password keys to the fingerprints" in str(error.value)


def test_unpinning_a_service_releases_its_containers_on_every_host_and_a_container_only_itself(tmp_path):
    """`unpin SERVICE` finds the service's containers held on any host from what each
    pin records (no host asked); pins an earlier kolla-salt wrote without their service
    are asked about (service_of); `unpin HOST:CONTAINER` removes that pin alone,
    `unpin CONTAINER` its pins on every host."""
    def fresh():
        return Pins(tmp_path / "pins.yml", services={"memcached": {"release": "2026.2"}}, containers={
            "host2:memcached": {"generation": 2, "service": "memcached"},
            "host3:memcached": {"generation": 2, "service": "memcached"},
            "host1:keystone": {"generation": 4, "service": "keystone"},
            "kst-memcached": {"generation": 3}})
    services = {"memcached", "keystone"}
    asked = []

    def service_of(key):
        asked.append(key)
        return "memcached" if key == "kst-memcached" else None
    pins = fresh()
    assert pins.release("memcached", services, service_of) == [
        "services.memcached", "containers.host2:memcached", "containers.host3:memcached", "containers.kst-memcached"]
    assert list(pins.containers) == ["host1:keystone"] and pins.services == {}
    assert asked == ["kst-memcached"]   # only the pin that does not say
    pins = fresh()
    assert pins.release("host3:memcached", services, service_of) == ["containers.host3:memcached"]
    assert set(pins.containers) == {"host2:memcached", "host1:keystone", "kst-memcached"}
    assert pins.release("glance", services, service_of) == []
    # A container's name, without a host: its pins on every host (as an upgrade drops them).
    pins.containers.update({"host1:memcached": {"generation": 2}, "host1:kst-memcached": {"generation": 2}})
    assert pins.release("memcached", {"keystone"}, service_of) == ["containers.host2:memcached",
                                                                   "containers.host1:memcached"]
    assert pins.release_container("kst-memcached") == ["containers.kst-memcached", "containers.host1:kst-memcached"]
    assert list(pins.containers) == ["host1:keystone"]


def test_a_pin_records_its_service_and_fingerprints_only_the_passwords_its_container_uses():
    kolla = {"settings": {"container_name_prefix": "t-"},
             "passwords": {"keystone_database_password": "kspw-1", "rabbitmq_password": "rbpw-2"},
             "services": [{"name": "keystone", "containers": [
                              {"spec": {"name": "t-keystone"}, "files": {"keystone.conf": "pass=kspw-1"}}]},
                          {"name": "rabbitmq", "containers": [
                              {"spec": {"name": "t-rabbitmq", "environment": {"P": "rbpw-2"}}, "files": {}}]}]}
    facts = pin_facts(kolla, "keystone")   # named without the prefix, as on the command line
    assert facts["service"] == "keystone" and list(facts["passwords"]) == ["keystone_database_password"]
    assert "kspw-1" not in str(facts)
    assert changed(facts["passwords"], {"keystone_database_password": "kspw-1"}) == []
    assert changed(facts["passwords"], {"keystone_database_password": "other"}) == ["keystone_database_password"]
    assert pin_facts(kolla, "t-nosuch") == {}


def test_a_base_pin_holds_a_service_on_its_base_and_outlives_a_release_upgrade(tmp_path):
    """upgrade --base holds a service on its base (pins.yml services.X.base); a release
    upgrade of the whole cloud forgets release pins, not base pins; a pin of what
    every service follows is dropped; a pin with neither is refused."""
    from kolla_salt.cli.converge import _move_base
    pins, declared = Pins.load(tmp_path), {}
    pins.services["keystone"] = {"release": "2026.2"}
    _move_base("trixie", {"mariadb": {"debian-bookworm"}, "rabbitmq": {"debian-trixie"}, "keystone": {"debian-bookworm"}},
               declared, pins)
    assert declared == {"kolla_base_distro_version": "trixie"}
    assert pins.services == {"keystone": {"release": "2026.2"}, "mariadb": {"base": "bookworm"}}
    assert pins.describe() == ["keystone follows release 2026.2", "mariadb follows base bookworm"]
    pins.forget_releases()
    assert pins.services == {"mariadb": {"base": "bookworm"}}
    pins.save()
    assert Pins.load(tmp_path, {"mariadb"}, {"2026.1"}).base_of("mariadb") == "bookworm"
    pins.drop_followed("2026.1", "bookworm")   # once the cloud declares bookworm, nothing is held
    assert pins.services == {}
    (tmp_path / "pins.yml").write_text("services:\n  mariadb: {}\n")
    with pytest.raises(ValidationError, match="services.mariadb must hold a release, a base or both"):
        Pins.load(tmp_path, {"mariadb"}, {"2026.1"})
