"""The journal of one container's swap, so that a swap killed at any point is
completed or undone by the next command that touches the container.

A swap replaces generation OLD of a container by generation NEW (an upgrade, a
reconfigure, a rollback). Before each step it writes where it is to
<state_dir>/containers/<name>/swap.json:

    planned   NEW is about to be created (as <name>.next)
    created   NEW exists; OLD still serves under <name>
    retired   OLD is stopped and kept aside as <name>.gen<OLD>
    healthy   NEW passed its check: the swap is as good as done

and removes the journal once history says NEW runs and kept generations are
pruned. The journal is only read
while nobody holds <name>/swap.lock: the swapping process holds it (flock)
from start to end, and the kernel releases it when that process dies, however
it dies. A journal without a holder is an interrupted swap: `healthy` is
completed, anything earlier is undone (OLD was the last known good one).
"""
import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path

from .errors import KollaError
from .private import write_private

STEPS = ("planned", "created", "retired", "healthy")


class SwapInProgress(KollaError):
    """Another process is replacing this container right now."""


class SwapJournal:
    def __init__(self, state_dir, name):
        self.root = Path(state_dir) / "containers" / name
        self.file = self.root / "swap.json"
        self.lock_file = self.root / "swap.lock"
        self.name = name

    @contextmanager
    def held(self):
        """Holds the container's swap lock; SwapInProgress if another process does."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SwapInProgress(f"container {self.name}: another kolla-salt command is replacing it "
                                     f"right now; try again when it is done") from None
            yield self
        finally:
            os.close(fd)   # releases the lock

    def read(self):
        """The interrupted swap's record, or None."""
        try:
            return json.loads(self.file.read_text())
        except FileNotFoundError:
            return None

    def begin(self, **record):
        self._write(dict(record, step="planned"))

    def step(self, step):
        assert step in STEPS, step
        self._write(dict(self.read(), step=step))

    def end(self):
        self.file.unlink(missing_ok=True)

    def _write(self, record):
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(self.file, json.dumps(record, sort_keys=True), durable=True)
