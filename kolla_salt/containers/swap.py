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
import time
from contextlib import contextmanager
from pathlib import Path

from . import generations
from ..errors import ContainerExited, KollaError
from ..images.build import remove_if_orphaned
from ..private import write_private
from .balancer import REQUEST_TIMEOUT, seconds, server_name
from .engine import labelled_spec, listen_port, run_check
from .spec import LABEL_GENERATION, declared_spec

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


def _other_listen_port(spec, old):
    """The port of a new generation behind haproxy: of two (blue-green), the one the
    old one does not listen on; of one, that one."""
    if not spec.listen:
        return None
    ports = spec.listen["ports"]
    return ports[-1] if listen_port(old, spec.listen) == ports[0] else ports[0]


def _serve_under_name(container, name):
    """A generation a swap ends with (the new one, or the old one back): under `name`,
    with the restart policy its spec declares (a swap sets "no" while it runs beside
    another or is kept aside), running. True if it had to be started."""
    container.reload()
    if container.name != name:
        container.rename(name)
    container.update(restart_policy={"Name": declared_spec(container.labels).get("restart_policy", "always")})
    if container.status == "running":
        return False
    container.start()
    return True


def _stop_timeout(spec):
    """Seconds Docker gives a container's stop before it kills it (Docker's default: 10)."""
    return int(spec.get("stop_timeout", 10))


def _await_stop_in_flight(container):
    """A swap killed after `created` may have asked Docker to stop the old generation
    (_retire), and Docker finishes a stop whose client is gone: waits for as long as
    such a stop can take, so that the old generation is started again after it, not
    before (it would be left stopped)."""
    deadline = time.monotonic() + _stop_timeout(declared_spec(container.labels)) + 2
    while container.status == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        container.reload()


class Swaps:
    """The swap itself, its journal's steps, its undoing and completing after a kill,
    and the traffic it moves (haproxy drains the old generation, the new one takes
    requests). A part of kolla_salt.containers.manager.ContainerManager: it uses the
    manager's client, balancer, out, state folder, kept generations, get(), history(),
    journal(), _create_generation(), _start_and_wait(), _next_generation(),
    _target_from_record() and wait_healthy()."""

    def _swap(self, target, generation):
        """Replaces the current container by a new generation made from `target`,
        journaling each step (kolla_salt.containers.swap); the caller holds the swap lock.
        Returns notes for the operator (where the old generation was drained)."""
        spec = target.spec
        journal = self.journal(spec.name)
        old = self.get(spec.name)
        old_generation = int(old.labels.get(LABEL_GENERATION, 0))
        aside = f"{spec.name}.gen{old_generation}"
        for leftover in (self.get(aside), self.get(f"{spec.name}.next")):   # not part of any generation now
            if leftover is not None:
                leftover.remove(force=True)
        overlap = spec.swap in ("overlap", "blue-green") and old.status == "running"
        # Only a generation that ran healthy is a rollback target. Docker's verdict can
        # be a minute old (health_docker_interval): its "unhealthy" is asked again.
        old_was_healthy = old.status == "running" and (
            old.health in ("healthy", "starting", "unknown") or run_check(old, labelled_spec(old))[0])
        journal.begin(generation=generation, old_generation=old_generation,
                      previous_outcome=generations.REPLACED if old_was_healthy else generations.FAILED)
        # The new image and container are ready before the outage starts. Beside a
        # running old one, the new one must not be revived by Docker if it exits.
        new = self._create_generation(target, generation, f"{spec.name}.next",
                                      restart_policy="no" if overlap else None,
                                      listen_port=_other_listen_port(spec, old))
        journal.step("created")
        healthy = overlap and self._start_new(new, old, spec, generation, old_generation, beside=True)
        if healthy:
            journal.step("healthy")
        drained = self._retire(old, aside)
        if not healthy:
            journal.step("retired")
            new.rename(spec.name)
            self._start_new(new, old, spec, generation, old_generation, beside=False)
            journal.step("healthy")
        self._complete(spec.name, new, generation, journal.read()["previous_outcome"])
        self.out(f"{spec.name}: generation {generation} healthy, generation {old_generation} kept as {aside}")
        return [drained] if drained else []

    def _complete(self, name, new, generation, previous_outcome):
        """The end of a swap whose new generation passed its check (in _swap, or in
        recover after a kill): it serves under its name with its declared restart
        policy, history says it runs, kept generations are pruned, the journal goes.
        Pruning, the reloads and the rechecks (spec `reloads`, `rechecks`) come before
        the journal's end: killed there, the swap is completed again, and they are done
        again."""
        _serve_under_name(new, name)
        self.history(name).set_running(generation, previous_outcome)
        self._prune(name)
        declared = declared_spec(new.labels)
        self._reload(declared.get("reloads") or ())
        self._recheck(name, declared.get("rechecks") or ())
        self.journal(name).end()

    def _reload(self, names):
        """Each of `names` that runs on this engine starts its service's processes
        again, which work out their start-time decisions anew. One behind haproxy is
        replaced by a new generation alike, blue/green: a reload in place (uwsgi's
        SIGHUP) leaves its API without a worker while the app loads again, and its
        clients wait or fail meanwhile. Any other gets SIGHUP."""
        for name in names:
            container = self.get(name)
            if container is None or container.status != "running":
                continue
            if self._listening(container):
                self._replace_alike(name)
            else:
                container.kill(signal="SIGHUP")
                self.out(f"{name}: reloaded (SIGHUP)")

    def _replace_alike(self, name):
        """A new generation of `name` made from the one running (its image, spec and
        config snapshot), swapped in the way its spec says."""
        self.out(f"{name}: restarting as a new generation alike (the same image, spec and config)")
        self._swap_to_record(name, lambda: self.history(name).get(
            int(self.get(name).labels.get(LABEL_GENERATION, 0))))

    def _swap_to_record(self, name, find_record):
        """Swaps `name` to a recorded generation as a new generation, under its swap lock
        and once an interrupted swap is finished: (the record find_record() gave, the new
        generation)."""
        with self.journal(name).held():
            self.recover(name)
            record = find_record()
            new_generation = self._next_generation(name)
            self._swap(self._target_from_record(name, record), new_generation)
        return record, new_generation

    def _recheck(self, replaced, names):
        """Waits until each of `names` that runs on this engine passes its check again:
        it lost its connection to `replaced` and makes it again by itself."""
        for name in names:
            container = self.get(name)
            spec = labelled_spec(container) if container is not None and container.status == "running" else None
            if spec is not None and spec.healthcheck is not None:
                self.out(f"{name}: waiting until it passes its check again (it reconnects to {replaced})")
                began = time.monotonic()
                self.wait_healthy(container, spec, just_started=False)
                self.out(f"{name}: passes its check again after {time.monotonic() - began:.0f} s")

    def _start_new(self, new, old, spec, generation, old_generation, beside):
        """Starts the new generation and waits for its check: True once it passes (and
        haproxy sends it requests). `beside`: the old one still runs (overlap). A new
        one that exits there could not share the port (an old generation without
        SO_REUSEPORT, another user): False, and the caller replaces the old one the
        stop-first way. Any other failure removes the new one, brings the old one
        back and raises."""
        try:
            self._start_and_wait(new, spec)
            self._take_traffic(new)
            return True
        except KollaError as error:
            if beside and isinstance(error, ContainerExited):
                self.out(f"{spec.name}: generation {generation} could not start beside generation "
                         f"{old_generation} ({str(error).splitlines()[0]}); stopping generation {old_generation} first")
                return False
            self._undo(spec.name, new, old, generation, old_generation)
            raise KollaError(f"container {spec.name}: generation {generation} failed ({error}); "
                             f"restored generation {old_generation}" + (" (it kept serving)" if beside else "")) from None

    def _listening(self, container):
        """(backend, server) of a container in the haproxies in front of it (`listen`),
        or None when there is none (not behind haproxy, or no haproxy deployed)."""
        listen = declared_spec(container.labels).get("listen")
        if not listen or self.balancer is None or not self.balancer.active():
            return None
        return listen["backend"], server_name(listen["address"], listen_port(container, listen))

    def _take_traffic(self, container):
        """A healthy generation behind haproxy gets requests: its server is made ready and
        haproxy's own check must have found it up."""
        where = self._listening(container)
        if where:
            self.balancer.take_traffic(*where, timeout=self.health_timeout)

    def _retire(self, old, aside):
        """Stops the old generation and keeps it aside; restart policy "no" so that a
        daemon restart cannot revive it. Returns _stop's note."""
        drained = self._stop(old)
        old.rename(aside)
        old.update(restart_policy={"Name": "no"})
        return drained

    def _stop(self, container):
        """Stops a container the way its spec says, once what it serves went elsewhere:
        behind haproxy (`listen`), no haproxy gives it a new session; its `before_stop`
        command runs (rabbitmq hands its clients and queue leaders to the other nodes,
        a Galera member ends its clients' idle connections); behind haproxy, the
        sessions it has end, for up to listen.drain_timeout (as long as haproxy lets a
        request run: a loaded host may take far longer than the stop timeout to answer
        what it holds); then SIGTERM and up to its stop_timeout. What fails before the
        SIGTERM is reported, and the stop goes on: a node that cannot hand over must
        still stop. Returns a note naming the hosts whose haproxy drained it, or None."""
        spec = declared_spec(container.labels)
        running = container.status == "running"
        where = self._listening(container) if running else None
        drained = None
        try:
            if where:
                timeout = int(spec["listen"].get("drain_timeout", seconds(REQUEST_TIMEOUT)))
                self.out(f"{container.name}: draining {where[1]} in haproxy backend {where[0]} (its sessions "
                         f"have up to {timeout} s to end)")
                self.balancer.drain(*where, timeout=timeout)
            command = spec.get("before_stop")
            if command and running:
                done = container.exec_run(command)
                self.out(f"{container.name}: {' '.join(command)}" + (
                    f": failed ({done.exit_code}): {done.output.decode(errors='replace').strip()[-300:]}"
                    if done.exit_code else ""))
            if where:
                hosts = self.balancer.wait_drained(*where, timeout=timeout)
                drained = f"{where[1]} drained in the haproxy of {', '.join(hosts)}"
        except KollaError as error:
            self.out(f"{container.name}: not drained ({error}); stopping it anyway")
        container.stop(timeout=_stop_timeout(spec))
        return drained

    def _undo(self, name, new, old, generation, old_generation):
        """The new generation goes; the old one serves under its name again, with the
        restart policy it was created with."""
        if new is not None:
            new.remove(force=True)
        history = self.history(name)
        history.set_outcome(generation, generations.FAILED)
        history.drop_snapshot(generation)
        if old is not None:
            if _serve_under_name(old, name):
                self.out(f"{name}: generation {generation} failed; generation {old_generation} is back")
            try:
                self._take_traffic(old)   # it may have been drained
            except KollaError as error:
                self.out(f"{name}: generation {old_generation} is back but haproxy does not send it requests yet: {error}")
            history.set_running(old_generation)
        self.journal(name).end()

    def recover(self, name):
        """Finishes an interrupted swap of `name` (the caller holds its swap lock):
        completes one whose new generation had passed its check, undoes any other.
        Returns what it did, or None when there was nothing to finish."""
        record = self.journal(name).read()
        if record is None:
            return None
        generation, old_generation = record["generation"], record["old_generation"]
        new = self._generation_container(name, generation)
        old = self._generation_container(name, old_generation)
        if record["step"] == "healthy" and new is not None:
            if old is not None and old.name == name:
                self._retire(old, f"{name}.gen{old_generation}")
            self._complete(name, new, generation, record["previous_outcome"])
            done = f"completed the interrupted swap to generation {generation}"
        else:
            if record["step"] == "created" and old is not None:
                _await_stop_in_flight(old)
            self._undo(name, new, old, generation, old_generation)
            done = (f"undid the interrupted swap to generation {generation} ({record['step']}); "
                    f"generation {old_generation} serves")
        self.out(f"{name}: {done}")
        return done

    def recover_interrupted(self):
        """Finishes every interrupted swap of this deployment (`status` calls it):
        {name: what was done, or 'in progress' when a live command is swapping it}."""
        done = {}
        for journal_file in sorted(Path(self.state_dir, "containers").glob("*/swap.json")):
            name = journal_file.parent.name
            try:
                with self.journal(name).held():
                    what = self.recover(name)
            except SwapInProgress:
                what = "in progress"
            if what:
                done[name] = what
        return done

    def _prune(self, name):
        """Keeps the newest `generations_kept` replaced containers; removes older ones
        (never volumes: data outlives every generation)."""
        history = self.history(name)
        kept = [r for r in history.records() if r["outcome"] == generations.REPLACED]
        for record in kept[:-self.generations_kept or None] if self.generations_kept else kept:
            container = self.get(f"{name}.gen{record['generation']}")
            if container is not None:
                container.remove(force=True)
            history.set_outcome(record["generation"], generations.PRUNED)
            history.drop_snapshot(record["generation"])
            self._remove_image_if_orphaned(record.get("image_id"))

    def _remove_image_if_orphaned(self, image_id):
        """A pruned generation's image goes too once nothing names or uses it (a tag
        that was rebuilt leaves its old image untagged). Tagged images stay: they are
        releases an operator may roll back to without a rebuild."""
        if remove_if_orphaned(self.client, image_id):
            self.out(f"removed image {image_id[7:19]} (untagged, no generation left uses it)")
