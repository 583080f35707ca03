"""Generation history of each container, kept on the host.

<state_dir>/containers/<name>/history.json lists every generation ever created
(generation, image, image id, full spec, hashes, time, outcome), and
<state_dir>/containers/<name>/<generation>/config/ holds the config files that
generation was started with, so a rollback restores image, spec *and* config.
Files are 0600 and folders 0700: specs hold environment values.
"""
import json
import shutil
import time
from pathlib import Path

from ..private import write_private

# Outcomes of a generation. At most one generation of a container is RUNNING.
STARTING = "starting"    # created, not yet healthy (or a swap to it was interrupted)
RUNNING = "running"      # the current container, healthy when it took over
REPLACED = "replaced"    # was running, then replaced by a newer healthy one
FAILED = "failed"        # never became healthy (or its swap was undone), removed
PRUNED = "pruned"        # replaced and its container removed
REMOVED = "removed"      # was running; its container was removed (destroy, service disabled)
GOOD = (REPLACED, PRUNED, REMOVED)   # ran healthy: a rollback target


def recorded_names(state_dir):
    """Names of the containers whose history is kept under `state_dir`."""
    root = Path(state_dir) / "containers"
    return sorted(p.parent.name for p in root.glob("*/history.json")) if root.exists() else []


class History:
    def __init__(self, state_dir, name):
        self.root = Path(state_dir) / "containers" / name
        self.file = self.root / "history.json"

    def records(self):
        if not self.file.exists():
            return []
        return json.loads(self.file.read_text())

    def _write(self, records):
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(self.file, json.dumps(records, indent=1, sort_keys=True))

    def last_generation(self):
        return max((r["generation"] for r in self.records()), default=0)

    def add(self, generation, spec, image_id, config_hash):
        records = self.records()
        records.append({"generation": generation, "image": spec["image"], "image_id": image_id,
                        "spec": spec, "config_hash": config_hash, "created": time.time(),
                        "outcome": STARTING})
        self._write(records)

    def set_outcome(self, generation, outcome):
        records = self.records()
        for record in records:
            if record["generation"] == generation:
                record["outcome"] = outcome
        self._write(records)

    def set_running(self, generation, previous_outcome=REPLACED):
        """`generation` took over: it is the one RUNNING; the one that ran before
        gets `previous_outcome`, any other unfinished one FAILED."""
        records = self.records()
        for record in records:
            if record["generation"] == generation:
                record["outcome"] = RUNNING
            elif record["outcome"] == RUNNING:
                record["outcome"] = previous_outcome
            elif record["outcome"] == STARTING:
                record["outcome"] = FAILED
        self._write(records)

    def set_removed(self):
        """The container is gone: the running generation is REMOVED (still a
        rollback target), an unfinished one FAILED."""
        records = self.records()
        for record in records:
            record["outcome"] = {RUNNING: REMOVED, STARTING: FAILED}.get(record["outcome"], record["outcome"])
        self._write(records)

    def add_restart(self, generation, at, verdict):
        """The health loop restarted `generation` (same container, same generation):
        kept in its record, so history tells every restart, not only the last window's."""
        records = self.records()
        for record in records:
            if record["generation"] == generation:
                record.setdefault("restarts", []).append({"at": at, "verdict": verdict})
        self._write(records)

    def get(self, generation):
        return next((r for r in self.records() if r["generation"] == generation), None)

    def last_good_before(self, generation, skip=lambda record: False):
        """The newest generation older than `generation` that ran healthy (and is not
        one `skip` says to pass over)."""
        good = [r for r in self.records() if r["generation"] < generation and r["outcome"] in GOOD and not skip(r)]
        return good[-1] if good else None

    # -- config snapshots --------------------------------------------------------
    def config_snapshot(self, generation):
        return self.root / str(generation) / "config"

    def snapshot_config(self, generation, source):
        target = self.config_snapshot(generation)
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if source:
            shutil.copytree(source, target)
        else:
            target.mkdir()
        return target

    def drop_snapshot(self, generation):
        shutil.rmtree(self.root / str(generation), ignore_errors=True)
