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
