"""Managing containers from specs: plan, create, atomic swap, jobs, rollback.

A container is recreated only when its identity changed: its spec (hash in its
labels, image name and config folder left out), the id of its image (one image
tagged for two releases recreates nothing) or its config files (hash); one
that exists unchanged but is not running is started. Recreation is an atomic
swap: the new container is created while the old one still serves, then the
old one is stopped and renamed aside (kept, with restart policy "no" so a
daemon restart cannot revive it), the new one takes the name and must pass its
health check; if it does not, it is removed and the old one comes back under
its name. Every swap is journaled (kolla_salt.swap): one killed at any point
is completed or undone by the next command that touches the container.
"""
import json
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
import docker.errors

from . import generations
from .balancer import REQUEST_TIMEOUT, Balancers, Runtime, seconds, server_name
from .build import from_registry, image_folder, remove_if_orphaned
from .configfiles import read_config_files
from .errors import ContainerExited, HealthTimeout, ImageMissing, KollaError, NoEarlierGeneration
from .private import redact
from .spec import (CONFIG_MOUNT, LABEL_CONFIG_HASH, LABEL_GENERATION, LABEL_JOB, LABEL_LISTEN_PORT, LABEL_NAME,
                   LABEL_RELEASE, LABEL_SET, LABEL_SPEC, LABEL_SPEC_HASH, LABEL_VOLUME_ID, ContainerSpec, config_hash,
                   declared_spec, diff)
from .jobs import JobRunner
from .swap import SwapInProgress, SwapJournal

CAPABILITIES = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
    "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO "
    "SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME "
    "SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG "
    "WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE").split()

def capabilities_missing_from_bounding_set(status_file="/proc/self/status"):
    """Capabilities this host's bounding set lacks; --privileged needs all of them."""
    with open(status_file) as f:
        line = next(l for l in f if l.startswith("CapBnd:"))
    mask = int(line.split()[1], 16)
    return [name for bit, name in enumerate(CAPABILITIES) if not mask >> bit & 1]


def create_volume(client, name):
    """A named volume with an id of its own (see ContainerManager.ensure_volumes)."""
    return client.volumes.create(name, labels={LABEL_VOLUME_ID: uuid.uuid4().hex})


def run_check(container, spec):
    """Runs the spec's health check once through docker exec: (passed, its output)."""
    result = container.exec_run(list(spec.healthcheck.test))
    return result.exit_code == 0, (result.output or b"").decode(errors="replace").strip()[-500:]


def current_entries(client, prefix=""):
    """(name, listing entry) of each current managed container (not a kept-aside
    generation `<name>.gen<N>`) whose name starts with `prefix`, from one cheap
    listing (client.api.containers: labels, names, state, status, image id)."""
    for entry in client.api.containers(all=True, filters={"label": LABEL_NAME}):
        name = (entry.get("Labels") or {}).get(LABEL_NAME, "")
        if name.startswith(prefix) and f"/{name}" in entry.get("Names", []):
            yield name, entry


def passes_check(container, spec):
    """Whether the container runs and passes its check right now (False while it is
    being restarted)."""
    try:
        container.reload()
        return container.status == "running" and run_check(container, spec)[0]
    except docker.errors.APIError:
        return False


def listen_port(container, listen):
    """The port a container behind haproxy listens on (one from before blue-green, or
    created before the label, listens on the first of `listen.ports`)."""
    return int(container.labels.get(LABEL_LISTEN_PORT) or listen["ports"][0])


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


def _alike(record, other, where):
    """Whether two history records are one generation run again: the same image, config
    and spec (a rollback's target and what it makes; a restart by _replace_alike)."""
    def identity(r):
        return r["image_id"], r["config_hash"], ContainerSpec.from_dict(r["spec"], where=where).spec_hash()
    return identity(record) == identity(other)


@dataclass
class Plan:
    """What ensure() will do (or did) to one container."""
    name: str
    action: str                  # none | create | recreate | start | recover
    changes: dict = field(default_factory=dict)
    generation: int | None = None
    notes: list = field(default_factory=list)

    @property
    def changed(self):
        return self.action != "none"


@dataclass
class Target:
    """What a container must be: the spec to create it from and the identity it
    is compared by (spec hash, image id, config hash)."""
    spec: ContainerSpec
    image_id: str
    config_hash: str


def _labelled_spec(container):
    """The spec a managed container was created with (its kolla.spec label)."""
    return ContainerSpec.from_dict(declared_spec(container.labels), where=f"label of {container.name}")


class ContainerManager(JobRunner):
    def __init__(self, client=None, state_dir="/var/lib/kolla-salt", health_timeout=180,
                 generations_kept=2, secrets=(), out=None, balancer=None):
        self.client = client or docker.from_env(timeout=300)
        self.balancer = balancer   # kolla_salt.balancer.Balancers: the haproxies in front, or None
        self.state_dir = str(state_dir)
        self.health_timeout = health_timeout
        self.generations_kept = generations_kept
        self.secrets = list(secrets)
        self.out = out or (lambda message: None)
        self._missing_caps = None

    @classmethod
    def from_settings(cls, settings, passwords=(), out=None, client=None, remote_balancers=None, host="this host"):
        """The manager of a deployment: its state folder, health timeout and kept
        generations from the kolla settings; passwords are redacted from output.
        `remote_balancers`: how a swap reaches the haproxies of other hosts
        (kolla_salt.balancer.Balancers), through a master; `host`: this one's name."""
        balancer = (Balancers(Runtime(settings["haproxy_runtime_directory"]), remote_balancers, host)
                    if settings.get("enable_haproxy") else None)
        return cls(client, settings["kolla_state_directory"], settings["container_health_timeout"],
                   settings["generations_kept"], secrets=list(passwords), out=out, balancer=balancer)

    # -- reading ------------------------------------------------------------------
    def get(self, name):
        try:
            return self.client.containers.get(name)
        except docker.errors.NotFound:
            return None

    def history(self, name):
        return generations.History(self.state_dir, name)

    def journal(self, name):
        return SwapJournal(self.state_dir, name)

    def _generation_container(self, name, generation):
        found = self.client.containers.list(all=True, filters={"label": [
            f"{LABEL_NAME}={name}", f"{LABEL_GENERATION}={generation}"]})
        return found[0] if found else None

    def _check_image(self, spec):
        """The spec's image; one from a registry (docker_registry) is pulled when missing
        (also under --test: comparing needs its id; what runs does not change)."""
        try:
            return self.client.images.get(spec.image)
        except docker.errors.ImageNotFound:
            if from_registry(spec.image):
                self.out(f"{spec.name}: pulling {spec.image}")
                try:
                    return self.client.images.pull(spec.image)
                except docker.errors.APIError as error:
                    raise ImageMissing(f"container {spec.name}: image {spec.image} could not be pulled: "
                                       f"{error.explanation or error}") from None
            raise ImageMissing(f"container {spec.name}: image {spec.image} is not on this host; "
                               f"build it with `kolla-salt build {image_folder(spec.image)}`")

    def _target(self, spec, pin=None):
        if pin is None:
            return Target(spec, self._check_image(spec).id, config_hash(read_config_files(spec.config_dir)))
        record = self.history(spec.name).get(pin)
        if record is None:
            raise KollaError(f"pins.yml: containers.{spec.name}: generation {pin} is not in the history of "
                             f"{spec.name} (`kolla-salt history {spec.name}`; `kolla-salt unpin` removes the pin)")
        return self._target_from_record(spec.name, record)

    def _target_from_record(self, name, record):
        """A recorded generation as a target: its spec, the image it ran (by id if its
        tag moved since) and its config snapshot (or that of a later generation with
        the same identity, made from it, if its own was pruned)."""
        where = f"history of {name} generation {record['generation']}"
        spec = ContainerSpec.from_dict(record["spec"], where=where)
        history = self.history(name)
        same = [r for r in history.records()
                if _alike(r, record, where) and history.config_snapshot(r["generation"]).is_dir()]
        if not same:
            raise KollaError(f"{name}: the config files of generation {record['generation']} are no longer kept "
                             f"under {history.root}")
        snapshot = history.config_snapshot((same[0] if record in same else same[-1])["generation"])
        image = record["image"]
        try:
            if self.client.images.get(image).id != record["image_id"]:
                image = record["image_id"]   # the tag was rebuilt; the generation ran the old image
                self.client.images.get(image)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"{name}: generation {record['generation']} ran image {record['image']} "
                               f"({record['image_id'][7:19]}), which is no longer on this host") from None
        return Target(replace(spec, image=image, config_dir=str(snapshot)), record["image_id"],
                      record["config_hash"])

    def plan(self, spec, pin=None):
        """What ensure(spec, pin) would do; changes nothing. `pin`: hold the container
        at that generation of its history (pins.yml) instead of `spec`."""
        return self._plan(spec, pin)[0]

    def _plan(self, spec, pin):
        interrupted = self.journal(spec.name).read()
        if interrupted:
            what = "complete" if interrupted["step"] == "healthy" else "undo"
            return Plan(spec.name, "recover", {"swap": f"the swap to generation {interrupted['generation']} was "
                                                      f"interrupted ({interrupted['step']}): {what} it"},
                        interrupted["generation"]), None
        target = self._target(spec, pin)
        current = self.get(spec.name)
        if current is None:
            return Plan(spec.name, "create", {"container": f"create {spec.name} from {target.spec.image}"},
                        self._next_generation(spec.name), self._privilege_notes(spec)), target
        labels = current.labels
        changes = {}
        if labels.get(LABEL_SPEC_HASH) != target.spec.spec_hash():
            changes.update(diff(declared_spec(labels), target.spec.canonical()) or {"spec": "changed"})
        if current.image.id != target.image_id:
            changes["image"] = (f"{current.attrs['Config']['Image']} ({current.image.id[7:19]}) -> "
                                f"{target.spec.image} ({target.image_id[7:19]})")
        if labels.get(LABEL_CONFIG_HASH) != target.config_hash:
            changes["config"] = "config files changed"
        if changes:
            if pin is not None:
                changes["pin"] = f"held at generation {pin} by pins.yml"
            return Plan(spec.name, "recreate", changes, self._next_generation(spec.name),
                        self._privilege_notes(spec)), target
        generation = int(labels.get(LABEL_GENERATION, 0))
        if current.status != "running":
            return Plan(spec.name, "start", {"state": f"{current.status} -> running"}, generation), target
        record = self.history(spec.name).get(generation)
        if record is not None and record["outcome"] == generations.STARTING:
            # Created by a run that ended before its check passed.
            return Plan(spec.name, "start", {"health": f"generation {generation} was never confirmed healthy"},
                        generation), target
        return Plan(spec.name, "none", {}, generation), target

    def _next_generation(self, name):
        seen = [self.history(name).last_generation()]
        for container in self.client.containers.list(all=True, filters={"label": f"{LABEL_NAME}={name}"}):
            seen.append(int(container.labels.get(LABEL_GENERATION, 0)))
        return max(seen) + 1

    def _privilege_notes(self, spec):
        if spec.privileged and self._host_missing_caps():
            return ["this host forbids --privileged (its capability bounding set lacks "
                    f"{', '.join(self._host_missing_caps())}); granted every other capability instead"]
        return []

    def _host_missing_caps(self):
        if self._missing_caps is None:
            self._missing_caps = capabilities_missing_from_bounding_set()
        return self._missing_caps

    # -- acting -----------------------------------------------------------------------
    def ensure(self, spec, pin=None):
        """Converges one container to `spec` (or to the generation `pin`); returns the
        Plan it carried out. An interrupted swap of the container is finished first."""
        with self.journal(spec.name).held():
            recovered = self.recover(spec.name)
            plan, target = self._plan(spec, pin)
            if plan.action == "create":
                container = self._create_generation(target, plan.generation, spec.name)
                self._start_and_wait(container, target.spec)
                self._take_traffic(container)
                self.history(spec.name).set_running(plan.generation)
            elif plan.action == "recreate":
                plan.notes += self._swap(target, plan.generation)
            elif plan.action == "start":
                container = self.get(spec.name)
                self._start_and_wait(container, target.spec)
                self._take_traffic(container)
                self.history(spec.name).set_running(plan.generation)
        if recovered:
            plan.notes.append(recovered)
        return plan

    def _create_generation(self, target, generation, name, restart_policy=None, listen_port=None):
        spec = target.spec
        history = self.history(spec.name)
        snapshot = history.snapshot_config(generation, spec.config_dir)
        labels = dict(spec.labels)
        labels.update({LABEL_NAME: spec.name, LABEL_SET: spec.set_path, LABEL_GENERATION: str(generation),
                       LABEL_SPEC_HASH: spec.spec_hash(), LABEL_SPEC: json.dumps(spec.canonical(), sort_keys=True),
                       LABEL_CONFIG_HASH: target.config_hash})
        args = self._docker_args(spec, snapshot)
        if spec.listen:
            # Outside the spec: which of its two ports a generation takes is the swap's choice.
            listen_port = listen_port or spec.listen["ports"][0]
            labels[LABEL_LISTEN_PORT] = str(listen_port)
            args["environment"] = {**spec.environment, "KOLLA_LISTEN_PORT": str(listen_port)}
        if restart_policy:
            args["restart_policy"] = {"Name": restart_policy}
        full = spec.canonical()
        full["environment"] = dict(spec.environment)
        history.add(generation, full, target.image_id, target.config_hash)
        container = self.client.containers.create(name=name, labels=labels, **args)
        self.out(f"{spec.name}: created generation {generation} from {spec.image}")
        return container

    def ensure_volumes(self, spec):
        """Creates the named volumes a spec mounts, each with an id of its own (Docker
        would create them on first mount, without one): a job remembers the volumes it
        filled by these ids, so a removed and recreated volume runs it again."""
        for volume in spec.named_volumes():
            try:
                self.client.volumes.get(volume)
            except docker.errors.NotFound:
                create_volume(self.client, volume)

    def _volume_identity(self, volume):
        """`name@id`; a volume made before ids were given keeps `unlabelled` (stable:
        Docker's CreatedAt is the folder's modification time, not its creation)."""
        try:
            labels = self.client.volumes.get(volume).attrs.get("Labels") or {}
        except docker.errors.NotFound:
            return f"{volume}@missing"
        return f"{volume}@{labels.get(LABEL_VOLUME_ID, 'unlabelled')}"

    def _docker_args(self, spec, config_snapshot=None):
        self.ensure_volumes(spec)
        volumes = {}
        for entry in spec.volumes:
            source, dest, *mode = entry.split(":")
            volumes[source] = {"bind": dest, "mode": mode[0] if mode else "rw"}
        if config_snapshot is not None:
            volumes[str(config_snapshot)] = {"bind": CONFIG_MOUNT, "mode": "ro"}
        args = dict(image=spec.image, command=list(spec.command) if spec.command else None,
                    environment=spec.environment, volumes=volumes, devices=list(spec.devices) or None,
                    user=spec.user or "", detach=True,
                    restart_policy={"Name": spec.restart_policy} if spec.restart_policy != "no" else None,
                    healthcheck=spec.healthcheck.to_docker() if spec.healthcheck else None)
        modes = {"net": "network_mode", "pid": "pid_mode", "ipc": "ipc_mode", "uts": "uts_mode"}
        for ns in spec.host_namespaces:
            args[modes[ns]] = "host"
        if spec.privileged and not self._host_missing_caps():
            args["privileged"] = True
        elif spec.privileged:
            args.update(cap_add=["ALL"], cap_drop=self._host_missing_caps())
        elif spec.cap_add:
            args["cap_add"] = list(spec.cap_add)
        return args

    def _start_and_wait(self, container, spec):
        if container.status != "running":
            container.start()
        self.wait_healthy(container, spec)

    def wait_healthy(self, container, spec, timeout=None, just_started=True):
        """Runs the spec's check through docker exec until it passes (no waiting
        for Docker's first scheduled check); fails early if the container exits
        (or, `just_started`, was restarted by Docker since: it exited once)."""
        began = time.monotonic()
        deadline = began + (timeout or self.health_timeout)
        said = []   # [seconds in, answer, how many times in a row] of each different answer
        while True:
            container.reload()
            state = container.attrs["State"]
            if state["Status"] in ("exited", "dead") or state.get("Restarting") or (
                    just_started and container.attrs["RestartCount"]):
                raise ContainerExited(f"container {spec.name} exited with code {state['ExitCode']}:\n"
                                    + self._logs_tail(container))
            if state["Status"] == "running":
                if spec.healthcheck is None:
                    return
                passed, answer = run_check(container, spec)
                if passed:
                    return
                if said and said[-1][1] == answer:
                    said[-1][2] += 1
                else:
                    said.append([time.monotonic() - began, answer, 1])
            if time.monotonic() > deadline:
                # The last few answers, each from when it began: a check that timed out
                # all along reads differently from a start that ended late.
                told = "; ".join(f"from {at:.0f} s: {answer}" + (f" ({times} times)" if times > 1 else "")
                                 for at, answer, times in said[-3:]) or "no check has run yet"
                raise HealthTimeout(f"container {spec.name} did not pass its health check within "
                                    f"{timeout or self.health_timeout} s; its checks said: {redact(told, self.secrets)}")
            time.sleep(0.2)

    def _logs_tail(self, container, lines=30):
        text = container.logs(tail=lines).decode(errors="replace")
        return redact(text, self.secrets)

    def _swap(self, target, generation):
        """Replaces the current container by a new generation made from `target`,
        journaling each step (kolla_salt.swap); the caller holds the swap lock.
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
            old.health in ("healthy", "starting", "unknown") or run_check(old, _labelled_spec(old))[0])
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
            spec = _labelled_spec(container) if container is not None and container.status == "running" else None
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

    # -- removal -------------------------------------------------------------------------
    def deployment_containers(self, prefix="", running_only=False, outside_sets=None):
        """This deployment's containers, current and kept generations: those its own
        history records (another deployment on the engine, a test's, is not ours);
        with `outside_sets`, only those whose set is not among them. Read from one listing:
        only ours are inspected (every deploy asks for the undeclared ones)."""
        found = []
        for entry in self.client.api.containers(all=not running_only, filters={"label": LABEL_NAME}):
            name, set_path = entry["Labels"][LABEL_NAME], entry["Labels"].get(LABEL_SET)
            if (name.startswith(prefix) and (outside_sets is None or set_path not in outside_sets)
                    and self.history(name).file.exists()):
                found.append(self.client.containers.get(entry["Id"]))
        return found

    def stop(self, prefix="", services=()):
        """Stops this deployment's running containers (all, or those of `services`);
        returns their names. `deploy` starts them again."""
        return self.stop_each([c.name for c in self.deployment_containers(prefix, running_only=True)
                               if not services or c.labels.get(LABEL_SET, "").rsplit("/", 1)[-1] in services])

    def stop_each(self, names):
        """Stops each running container of `names`, in that order, the way a swap stops
        one (drained first); returns the names of those it stopped."""
        stopped = []
        for name in names:
            container = self.get(name)
            if container is not None and container.status == "running":
                self.out(f"{name}: stopping")
                self._stop(container)
                stopped.append(name)
        return stopped

    def start_each(self, names):
        """Starts each container of `names`, in that order: healthy, and taking
        haproxy's traffic, before the next."""
        for name in names:
            container = self.get(name)
            self.out(f"{name}: starting")
            self._start_and_wait(container, _labelled_spec(container))
            self._take_traffic(container)

    def undeclared(self, declared_sets, prefix=""):
        """This deployment's containers whose set is not among `declared_sets`: a
        service disabled, or no longer for this host."""
        return self.deployment_containers(prefix, outside_sets=declared_sets)

    def destroy_plan(self, prefix):
        """What `destroy` would remove here: {containers, jobs, volumes (those they
        mount), endings ({container: the command its spec runs before it goes,
        on_destroy})}, names only."""
        containers = self.deployment_containers(prefix)
        jobs = [c for c in self.client.containers.list(all=True, filters={"label": LABEL_JOB})
                if c.name.startswith(prefix)]
        endings = {c.name: declared_spec(c.labels).get("on_destroy") for c in containers if c.status == "running"}
        return {"containers": [c.name for c in containers], "jobs": [c.name for c in jobs],
                "volumes": sorted({m["Name"] for c in containers + jobs for m in c.attrs["Mounts"]
                                   if m["Type"] == "volume"}),
                "endings": {name: command for name, command in endings.items() if command}}

    def destroy(self, prefix, remove_volumes=False):
        """Removes this deployment's containers and jobs here (history says so: a
        rollback can still return to what ran), running each one's on_destroy command
        first while it still runs (what it made outside itself); its volumes only with
        `remove_volumes`. Returns the plan it carried out (destroy_plan)."""
        plan = self.destroy_plan(prefix)
        for name, command in plan["endings"].items():
            ended = self.client.containers.get(name).exec_run(command)
            self.out(f"{name}: {' '.join(command)}"
                     + (f": failed ({ended.exit_code}): {ended.output.decode(errors='replace').strip()[-500:]}"
                        if ended.exit_code else ""))
        for name in plan["jobs"]:
            self.client.containers.get(name).remove(force=True)
        for name in plan["containers"]:
            self.remove(self.client.containers.get(name))
        # A container removed by hand before (docker rm) still has a running generation in history.
        for name in generations.recorded_names(self.state_dir):
            if name.startswith(prefix) and self.get(name) is None:
                self.history(name).set_removed()
        for name in plan["volumes"] if remove_volumes else ():
            self.client.volumes.get(name).remove()
            self.out(f"removed volume {name}")
        return plan

    def remove(self, container):
        """Removes a managed container, never its volumes; when it is the current
        generation, history says it was removed."""
        name = container.labels[LABEL_NAME]
        container.remove(force=True)
        if container.name == name:
            self.history(name).set_removed()
            self.journal(name).end()
        self.out(f"{name}: removed {container.name}")

    # -- rollback ------------------------------------------------------------------------
    def rollback_target(self, name):
        """The history record of the last known good generation before the current one."""
        current = self.get(name)
        if current is None:
            raise KollaError(f"rollback: no container named {name}")
        generation = int(current.labels.get(LABEL_GENERATION, 0))
        history = self.history(name)
        running = history.get(generation)
        # A generation alike the running one (a restart by _replace_alike) is no way back.
        record = history.last_good_before(
            generation, skip=lambda r: running is not None and _alike(r, running, f"history of {name}"))
        if record is None:
            raise NoEarlierGeneration(f"rollback: {name} has no earlier healthy generation to return to "
                                      f"(current generation {generation}; one alike, with its image, spec and "
                                      f"config, is none)")
        why = declared_spec(current.labels).get("forward_only")
        release, then = current.image.labels.get(LABEL_RELEASE), self._release_of(record["image_id"])
        if why and release and then and release != then:
            raise KollaError(f"rollback: {name} runs {release} and generation {record['generation']} ran {then}: "
                             f"it cannot go back to an older release alone ({why}), so nothing was changed. "
                             f"`kolla-salt rollback --release {then}` takes the whole upgrade back with its "
                             f"database; or mend forward: fix, then `kolla-salt deploy` or `upgrade`")
        return record

    def _release_of(self, image):
        """The release an image was built for (its kolla.release label), or None."""
        try:
            return self.client.images.get(image).labels.get(LABEL_RELEASE)
        except docker.errors.ImageNotFound:
            return None

    def rollback(self, name):
        """Returns `name` to its last known good generation, as a new generation:
        (the generation returned to, the new generation)."""
        record, new_generation = self._swap_to_record(name, lambda: self.rollback_target(name))
        return record["generation"], new_generation
