"""What a command says when it cannot go on: a reader gone (`kolla-salt status | head`)
ends it quietly, a host's refusal reaches the operator as its reason."""
import os
import subprocess
import sys


def test_a_closed_pipe_ends_no_command_with_a_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)       # the reader left before the first line
    try:
        proc = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "releases"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_rollback_a_host_refuses_says_the_hosts_reason(monkeypatch):
    """Through a master (HOST:CONTAINER) the refusal of kolla_container.rollback_target
    reaches the operator as the host's reason, naming the host (it was a TypeError once,
    a helper shadowing the one that names hosts)."""
    import argparse

    import pytest

    from kolla_salt.cli import operate
    from kolla_salt.errors import KollaError
    from kolla_salt.roads.master import Master
    monkeypatch.setattr(operate, "_one_host", lambda args, host, function, name: "ERROR: memcached: no earlier "
                                                                                 "generation to go back to")
    args = argparse.Namespace(command="rollback", release=None, road=Master("/nonexistent"),
                              container="host2:memcached")
    with pytest.raises(KollaError) as refusal:
        operate.cmd_rollback(args)
    assert str(refusal.value) == "rollback: host2: memcached: no earlier generation to go back to"


def test_settle_follows_the_declaration_as_it_is_after_the_command(tmp_path, monkeypatch, capsys):
    """A release rollback declares after its road was made: settling must read the
    declaration then (here the health loop was turned off meanwhile, so it is stopped,
    not kept running on the settings the road began with)."""
    import yaml

    from kolla_salt.healing import healthloop
    from kolla_salt.roads.saltcall import Here
    globals_file = tmp_path / "globals.yml"
    declared = {"enable_health_loop": True, "kolla_state_directory": str(tmp_path / "state")}
    globals_file.write_text(yaml.safe_dump(declared))
    road = Here(str(tmp_path))
    globals_file.write_text(yaml.safe_dump({**declared, "enable_health_loop": False}))
    stopped = []
    monkeypatch.setattr(healthloop, "backup_schedule", lambda settings, config_dir: None)
    monkeypatch.setattr(healthloop, "stop_health_daemon", lambda settings: stopped.append(settings) or True)
    monkeypatch.setattr(healthloop, "ensure_health_daemon", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("the loop was kept on the settings the road began with")))
    road.settle("rollback")
    assert len(stopped) == 1
    assert "[rollback] health loop: stopped (enable_health_loop is false)" in capsys.readouterr().out
