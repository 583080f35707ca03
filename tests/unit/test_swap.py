"""The swap journal: written before each step, readable after a crash, and the
lock that tells a live swap from an interrupted one."""
import multiprocessing
import os
import signal

import pytest

from kolla_salt.containers.swap import SwapInProgress, SwapJournal


def test_journal_records_each_step_and_ends(tmp_path):
    journal = SwapJournal(tmp_path, "keystone")
    assert journal.read() is None
    journal.begin(generation=4, old_generation=3, previous_outcome="replaced")
    journal.step("created")
    assert journal.read() == {"generation": 4, "old_generation": 3, "previous_outcome": "replaced",
                              "step": "created"}
    assert oct(journal.file.stat().st_mode & 0o777) == "0o600"
    journal.end()
    assert journal.read() is None


def _hold_forever(state_dir, ready):
    with SwapJournal(state_dir, "keystone").held():
        ready.set()
        signal.pause()


def test_the_lock_is_held_by_a_live_swapper_and_freed_when_it_is_killed(tmp_path):
    ready = multiprocessing.Event()
    swapper = multiprocessing.Process(target=_hold_forever, args=(tmp_path, ready))
    swapper.start()
    try:
        assert ready.wait(10)
        with pytest.raises(SwapInProgress):
            with SwapJournal(tmp_path, "keystone").held():
                pass
    finally:
        os.kill(swapper.pid, signal.SIGKILL)
        swapper.join()
    with SwapJournal(tmp_path, "keystone").held():   # the kernel released it with the process
        pass
