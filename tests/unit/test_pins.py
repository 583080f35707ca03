"""pins.yml: the decisions of upgrade and rollback, kept in the declared state."""
import pytest

from kolla_salt.errors import ValidationError
from kolla_salt.pins import Pins


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
    from kolla_salt.inventory import held_password_problems
    from kolla_salt.pins import changed, fingerprints
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
