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
    monkeypatch.setattr(operate, "_one_host", lambda args, host, function, name: "ERROR: memcached: no earlier "
                                                                                 "generation to go back to")
    args = argparse.Namespace(command="rollback", release=None, master=object(), container="host2:memcached")
    with pytest.raises(KollaError) as refusal:
        operate.cmd_rollback(args)
    assert str(refusal.value) == "rollback: host2: memcached: no earlier generation to go back to"
