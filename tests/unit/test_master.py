"""What a master compares to decide which minions' pillars to refresh (kolla_salt.master.held_digest)."""
import yaml

from kolla_salt.inventory import build_pillar
from kolla_salt.master import held_digest
from operator_files import write_secrets


def pillar(folder, **settings):
    (folder / "globals.yml").write_text(yaml.safe_dump({"network_interface": "eth0", **settings}))
    return build_pillar(folder, minion_id="host1", interfaces={"eth0": ["198.18.0.11"]})


def test_a_minion_is_refreshed_only_when_what_it_holds_changed(tmp_path):
    write_secrets(tmp_path)
    held = pillar(tmp_path)
    digest = held_digest(held)
    assert held_digest(pillar(tmp_path)) == digest   # the same declaration: no refresh
    # What each state run compiles afresh (the services: a new template's output) and Salt's own keys.
    assert held_digest({**held, "kolla": {**held["kolla"], "services": []}, "schedule": {}}) == digest
    # What the minion uses between state runs: its health loop's beacon, its settings, the passwords it redacts.
    assert held_digest(pillar(tmp_path, health_stall_window=11)) != digest
    assert held_digest(pillar(tmp_path, enable_haproxy=False)) != digest
    write_secrets(tmp_path, value=lambda key: f"other-{key}")
    assert held_digest(pillar(tmp_path)) != digest
