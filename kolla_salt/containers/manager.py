"""Managing containers from specs: plan, create, atomic swap, jobs, rollback.

A container is recreated only when its identity changed: its spec (hash in its
labels, image name and config folder left out), the id of its image (one image
tagged for two releases recreates nothing) or its config files (hash); one
that exists unchanged but is not running is started. Recreation is an atomic
swap: the new container is created while the old one still serves, then the
old one is stopped and renamed aside (kept, with restart policy "no" so a
daemon restart cannot revive it), the new one takes the name and must pass its
health check; if it does not, it is removed and the old one comes back under
its name. Every swap is journaled (kolla_salt.containers.swap): one killed at any point
is completed or undone by the next command that touches the container.

ContainerManager is three parts: this module plans, creates, removes and rolls
back; kolla_salt.containers.swap (Swaps) replaces one generation by the next and moves the
traffic; kolla_salt.containers.jobs (JobRunner) runs one-shot jobs. kolla_salt.containers.engine reads
what the Docker engine says of a managed container, for all of them and for the
health loop.
"""
import json
import time
from dataclasses import dataclass, field, replace

import docker
import docker.errors

from . import generations
from ..errors import ContainerExited, HealthTimeout, ImageMissing, KollaError, NoEarlierGeneration
from ..images.build import from_registry, image_folder
from ..private import redact
from .balancer import Balancers, Runtime
from .configfiles import read_config_files
from .engine import UNCONFINED_SYSTEM_PATHS, create_container, create_volume, labelled_spec, run_check
from .jobs import JobRunner
from .spec import (CONFIG_MOUNT, LABEL_CONFIG_HASH, LABEL_GENERATION, LABEL_JOB, LABEL_LISTEN_PORT, LABEL_NAME,
                   LABEL_RELEASE, LABEL_SET, LABEL_SPEC, LABEL_SPEC_HASH, LABEL_VOLUME_ID, ContainerSpec, config_hash,
                   declared_spec, diff)
from .swap import Swaps, SwapJournal

# The pause after each failed check while a container starts: a check is a docker exec,
# 150 ms of CPU with the engine's share (dockerd, containerd, runc, the check's own
# process), so checking every 0.2 s kept 0.4 of a core busy for as long as a service
# took to start, on a 2-core host slowing the start it waited for. Growing to 1 s, a
# service that starts in 30 s is checked about 27 times instead of 80, and found
# healthy at most a second late.
CHECK_PAUSES = (0.2, 0.4, 0.8, 1.0)

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


class ContainerManager(Swaps, JobRunner):
    def __init__(self, client=None, state_dir="/var/lib/kolla-salt", health_timeout=180,
                 generations_kept=2, secrets=(), out=None, balancer=None):
        self.client = client or docker.from_env(timeout=300)
        self.balancer = balancer   # kolla_salt.containers.balancer.Balancers: the haproxies in front, or None
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
        (kolla_salt.containers.balancer.Balancers), through a master; `host`: this one's name."""
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
                    f"{', '.join(self._host_missing_caps())}); granted every other capability and a writable "
                    "/proc/sys instead"]
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
        container = create_container(self.client, name=name, labels=labels, **args)
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
            # What --privileged gives that capabilities do not: /proc's system paths
            # unmasked and writable (a namespace's own sysctls, /proc/sys/net).
            args.update(cap_add=["ALL"], cap_drop=self._host_missing_caps(), **{UNCONFINED_SYSTEM_PATHS: True})
        elif spec.cap_add:
            args["cap_add"] = list(spec.cap_add)
        return args

    def _start_and_wait(self, container, spec):
        if container.status != "running":
            container.start()
        self.wait_healthy(container, spec)

    def wait_healthy(self, container, spec, timeout=None, just_started=True):
        """Runs the spec's check through docker exec until it passes (no waiting
        for Docker's first scheduled check), less often the longer it fails
        (CHECK_PAUSES); fails early if the container exits (or, `just_started`, was
        restarted by Docker since: it exited once)."""
        began = time.monotonic()
        deadline = began + (timeout or self.health_timeout)
        said = []   # [seconds in, answer, how many times in a row] of each different answer
        failed = 0
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
                failed += 1
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
            time.sleep(CHECK_PAUSES[min(failed, len(CHECK_PAUSES) - 1)])

    def _logs_tail(self, container, lines=30):
        text = container.logs(tail=lines).decode(errors="replace")
        return redact(text, self.secrets)

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
            self._start_and_wait(container, labelled_spec(container))
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
        `remove_volumes`. Returns the plan it carried out (destroy_plan), with what
        each ending said (ended: retire)."""
        plan = self.destroy_plan(prefix)
        for name in plan["jobs"]:
            self.client.containers.get(name).remove(force=True)
        plan["ended"] = self.retire([self.client.containers.get(name) for name in plan["containers"]])
        # A container removed by hand before (docker rm) still has a running generation in history.
        for name in generations.recorded_names(self.state_dir):
            if name.startswith(prefix) and self.get(name) is None:
                self.history(name).set_removed()
        for name in plan["volumes"] if remove_volumes else ():
            self.client.volumes.get(name).remove()
            self.out(f"removed volume {name}")
        return plan

    def in_use(self, container):
        """What still uses a running container (its spec's in_use command, one item a
        line); [] when it declares none or is not running. A command that fails is
        an answer too: what uses the container is not known."""
        command = declared_spec(container.labels).get("in_use") if container.status == "running" else None
        if not command:
            return []
        asked = container.exec_run(command)
        said = asked.output.decode(errors="replace").strip()
        if asked.exit_code:
            return [f"(`{' '.join(command)}` failed ({asked.exit_code}): {said[-300:]})"]
        return said.splitlines()

    def undeclared_in_use(self, declared_sets, prefix=""):
        """{name: what uses it} of the undeclared containers something still uses."""
        found = {c.name: self.in_use(c) for c in self.undeclared(declared_sets, prefix)}
        return {name: users for name, users in found.items() if users}

    def retire(self, containers):
        """Removes `containers` (never their volumes), each running one's on_destroy
        command first, every ending before any removal: an ending may need another
        leaving container (ovn-controller's exit needs Open vSwitch's database).
        Returns {name: what its ending said} of those that have one. None is started
        again meanwhile: Docker's restart policy would start an ending's container again once
        its process ended (ovn-controller's exit: it registered its chassis again
        while nova-compute's ending ran, found by the lab test)."""
        for container in containers:
            container.update(restart_policy={"Name": "no"})
        said = {container.name: self.run_on_destroy(container) for container in containers}
        for container in containers:
            self.remove(container)
        return {name: line for name, line in said.items() if line}

    def run_on_destroy(self, container):
        """Runs the on_destroy command of a running container before it goes: what it
        made outside itself (Open vSwitch's bridges) goes too. Returns the line saying
        what ran, how it failed and what it said; None when nothing ran."""
        command = declared_spec(container.labels).get("on_destroy") if container.status == "running" else None
        if not command:
            return None
        ended = container.exec_run(command)
        output = ended.output.decode(errors="replace").strip()[-500:]
        line = (" ".join(command) + (f": failed ({ended.exit_code})" if ended.exit_code else "")
                + (f": {output}" if output else ""))
        self.out(f"{container.name}: {line}")
        return line

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


def kept_in_use(found):
    """Why a deploy keeps the containers of found ({name: what uses it}) though it no
    longer declares them."""
    return "; ".join(f"{name} is kept though this host no longer declares it: {len(users)} still use it "
                     f"({', '.join(users)}); delete them or move them to another host first "
                     f"(`kolla-salt destroy` removes it regardless)" for name, users in sorted(found.items()))
