"""A command whose reader has gone (`kolla-salt status | head`) exits quietly."""
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
