"""`kolla-salt history` tells every restart the health loop made, under its generation."""
import json

import yaml

from kolla_salt import cli
from kolla_salt.containers.generations import History


def test_history_lists_the_health_loops_restarts_under_their_generation(tmp_path, capsys):
    config = tmp_path / "config"
    config.mkdir()
    (config / "globals.yml").write_text(yaml.safe_dump({"kolla_state_directory": str(tmp_path / "state"),
                                                        "container_name_prefix": "kst-"}))
    history = History(tmp_path / "state", "kst-memcached")
    history.add(1, {"image": "kolla-salt/memcached:1"}, "sha256:" + "a" * 64, "cfg1")
    history.set_running(1)
    history.add_restart(1, 1_700_000_000.0, "hung")
    assert cli.main(["--config-dir", str(config), "history", "memcached", "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["outcome"] == "running" and row["restarts"] == [{"at": "2023-11-14 22:13:20 UTC", "verdict": "hung"}]
    assert cli.main(["--config-dir", str(config), "history", "memcached"]) == 0
    assert "restarted 2023-11-14 22:13:20 UTC by the health loop (hung)" in capsys.readouterr().out
