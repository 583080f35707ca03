"""Managing containers from specs: plan, create, atomic swap, jobs, rollback.

A container is recreated only when its canonical spec or its config files
changed (hashes in its labels); a container that exists unchanged but is not
running is started. Recreation is an atomic swap: the new container is created
while the old one still serves, then the old one is stopped and renamed aside
(kept, with restart policy "no" so a daemon restart cannot revive it), the new
one takes the name and must pass its health check; if it does not, it is
removed and the old one comes back under its name.
"""
import json
import os
import time
from dataclasses import dataclass, field

import docker
import docker.errors

from . import generations
from .build import image_folder, remove_if_orphaned
from .errors import ContainerExited, HealthTimeout, ImageMissing, JobFailed, KollaError
from .spec import (CONFIG_MOUNT, LABEL_CONFIG_HASH, LABEL_GENERATION, LABEL_JOB, LABEL_NAME,
                   LABEL_SET, LABEL_SPEC, LABEL_SPEC_HASH, ContainerSpec, config_hash, declared_spec, diff)

CAPABILITIES = (
    "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
    "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO "
    "SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME "
    "SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG "
    "WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE").split()

JOBS_REMEMBERED = 5   # successful job runs remembered per job (see job_pending)


def capabilities_missing_from_bounding_set(status_file="/proc/self/status"):
    """Capabilities this host's bounding set lacks; --privileged needs all of them."""
    with open(status_file) as f:
        line = next(l for l in f if l.startswith("CapBnd:"))
    mask = int(line.split()[1], 16)
    return [name for bit, name in enumerate(CAPABILITIES) if not mask >> bit & 1]


def read_config_files(config_dir):
    """{relative path: text} of a rendered config folder (empty if none)."""
    files = {}
    if config_dir and os.path.isdir(config_dir):
        for root, _, names in os.walk(config_dir):
            for name in names:
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(path, config_dir)] = f.read()
    return files


def run_check(container, spec):
    """Runs the spec's health check once through docker exec: (passed, its output)."""
    result = container.exec_run(list(spec.healthcheck.test))
    return result.exit_code == 0, (result.output or b"").decode(errors="replace").strip()[-500:]


def managed_containers(client, prefix="", running_only=False):
    """The managed containers of one deployment (kolla.name starts with `prefix`),
    current and kept-aside generations."""
    return [c for c in client.containers.list(all=not running_only, filters={"label": LABEL_NAME})
            if c.labels[LABEL_NAME].startswith(prefix)]


def passes_check(container, spec):
    """Whether the container runs and passes its check right now (False while it is
    being restarted)."""
    try:
        container.reload()
        return container.status == "running" and run_check(container, spec)[0]
    except docker.errors.APIError:
        return False


def redact(text, secrets):
    for secret in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "********")
    return text


@dataclass
class Plan:
    """What ensure() will do (or did) to one container."""
    name: str
    action: str                  # none | create | recreate | start
    changes: dict = field(default_factory=dict)
    generation: int | None = None
    notes: list = field(default_factory=list)

    @property
    def changed(self):
        return self.action != "none"


class ContainerManager:
    def __init__(self, client=None, state_dir="/var/lib/kolla-salt", health_timeout=180,
                 generations_kept=2, secrets=(), out=None):
        self.client = client or docker.from_env(timeout=300)
        self.state_dir = str(state_dir)
        self.health_timeout = health_timeout
        self.generations_kept = generations_kept
        self.secrets = list(secrets)
        self.out = out or (lambda message: None)
        self._missing_caps = None

    @classmethod
    def from_settings(cls, settings, passwords=(), out=None, client=None):
        """The manager of a deployment: its state folder, health timeout and kept
        generations from the kolla settings; passwords are redacted from output."""
        return cls(client, settings["kolla_state_directory"], settings["container_health_timeout"],
                   settings["generations_kept"], secrets=list(passwords), out=out)

    # -- reading ------------------------------------------------------------------
    def get(self, name):
        try:
            return self.client.containers.get(name)
        except docker.errors.NotFound:
            return None

    def history(self, name):
        return generations.History(self.state_dir, name)

    def _check_image(self, spec):
        try:
            return self.client.images.get(spec.image)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"container {spec.name}: image {spec.image} is not on this host; "
                               f"build it with `kolla-salt build {image_folder(spec.image)}`")

    def plan(self, spec):
        image = self._check_image(spec)
        current = self.get(spec.name)
        wanted_config = config_hash(read_config_files(spec.config_dir))
        if current is None:
            return Plan(spec.name, "create", {"container": f"create {spec.name} from {spec.image}"},
                        self._next_generation(spec.name), self._privilege_notes(spec))
        labels = current.labels
        changes = {}
        if labels.get(LABEL_SPEC_HASH) != spec.spec_hash():
            changes.update(diff(declared_spec(labels), spec.canonical()) or {"spec": "changed"})
        elif image.id != current.image.id:
            changes["image"] = f"{spec.image} was rebuilt ({current.image.id[7:19]} -> {image.id[7:19]})"
        if labels.get(LABEL_CONFIG_HASH) != wanted_config:
            changes["config"] = "config files changed"
        if changes:
            return Plan(spec.name, "recreate", changes, self._next_generation(spec.name),
                        self._privilege_notes(spec))
        if current.status != "running":
            return Plan(spec.name, "start", {"state": f"{current.status} -> running"},
                        int(labels.get(LABEL_GENERATION, 0)))
        return Plan(spec.name, "none", {}, int(labels.get(LABEL_GENERATION, 0)))

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
    def ensure(self, spec):
        """Converges one container to `spec`; returns the Plan it carried out."""
        plan = self.plan(spec)
        if plan.action == "create":
            self._create_generation(spec, plan.generation, spec.name)
            self._start_and_wait(self.get(spec.name), spec)
        elif plan.action == "recreate":
            self._swap(spec, plan.generation)
        elif plan.action == "start":
            container = self.get(spec.name)
            self._start_and_wait(container, spec)
        return plan

    def _create_generation(self, spec, generation, name, restart_policy=None):
        history = self.history(spec.name)
        snapshot = history.snapshot_config(generation, spec.config_dir)
        files = read_config_files(spec.config_dir)
        image = self._check_image(spec)
        labels = dict(spec.labels)
        labels.update({LABEL_NAME: spec.name, LABEL_SET: spec.set_path, LABEL_GENERATION: str(generation),
                       LABEL_SPEC_HASH: spec.spec_hash(), LABEL_SPEC: json.dumps(spec.canonical(), sort_keys=True),
                       LABEL_CONFIG_HASH: config_hash(files)})
        args = self._docker_args(spec, snapshot)
        if restart_policy:
            args["restart_policy"] = {"Name": restart_policy}
        container = self.client.containers.create(name=name, labels=labels, **args)
        full = spec.canonical()
        full["environment"] = dict(spec.environment)
        history.add(generation, full, image.id, labels[LABEL_CONFIG_HASH])
        self.out(f"{spec.name}: created generation {generation} from {spec.image}")
        return container

    def _docker_args(self, spec, config_snapshot=None):
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
        container.start()
        self.wait_healthy(container, spec)

    def wait_healthy(self, container, spec, timeout=None):
        """Runs the spec's check through docker exec until it passes (no waiting
        for Docker's first scheduled check); fails early if the container exits."""
        deadline = time.monotonic() + (timeout or self.health_timeout)
        last = "no check has run yet"
        while True:
            container.reload()
            state = container.attrs["State"]
            if state["Status"] in ("exited", "dead") or state.get("Restarting") or container.attrs["RestartCount"]:
                raise ContainerExited(f"container {spec.name} exited with code {state['ExitCode']}:\n"
                                    + self._logs_tail(container))
            if state["Status"] == "running":
                if spec.healthcheck is None:
                    return
                passed, last = run_check(container, spec)
                if passed:
                    return
            if time.monotonic() > deadline:
                raise HealthTimeout(f"container {spec.name} did not pass its health check within "
                                    f"{timeout or self.health_timeout} s; last check said: {redact(last, self.secrets)}")
            time.sleep(0.2)

    def _logs_tail(self, container, lines=30):
        text = container.logs(tail=lines).decode(errors="replace")
        return redact(text, self.secrets)

    def _swap(self, spec, generation):
        old = self.get(spec.name)
        old_generation = int(old.labels.get(LABEL_GENERATION, 0))
        aside = f"{spec.name}.gen{old_generation}"
        temp_name = f"{spec.name}.next"
        for leftover in (self.get(aside), self.get(temp_name)):   # of an interrupted swap
            if leftover is not None:
                leftover.remove(force=True)
        overlap = spec.swap == "overlap" and old.status == "running"
        # The new image and container are ready before the outage starts. Beside a
        # running old one, the new one must not be revived by Docker if it exits.
        new = self._create_generation(spec, generation, temp_name, restart_policy="no" if overlap else None)
        old_was_healthy = old.status == "running" and old.health in ("healthy", "starting", "unknown")
        healthy = overlap and self._start_new(new, old, spec, generation, old_generation, beside=True)
        self._retire(old, aside)
        new.rename(spec.name)
        if overlap:
            new.update(restart_policy={"Name": spec.restart_policy})
        if not healthy:
            self._start_new(new, old, spec, generation, old_generation, beside=False)
        # Only a generation that ran healthy is a rollback target.
        self.history(spec.name).set_outcome(
            old_generation, generations.REPLACED if old_was_healthy else generations.FAILED)
        self.out(f"{spec.name}: generation {generation} healthy, generation {old_generation} kept as {aside}")
        self._prune(spec.name)

    def _start_new(self, new, old, spec, generation, old_generation, beside):
        """Starts the new generation and waits for its check; True once it passes.
        `beside`: the old one still runs (overlap). A new one that exits there could
        not share the port (an old generation without SO_REUSEPORT, another user):
        False, and the caller replaces the old one the stop-first way. Any other
        failure removes the new one, brings the old one back and raises."""
        try:
            self._start_and_wait(new, spec)
            return True
        except KollaError as error:
            if beside and isinstance(error, ContainerExited):
                self.out(f"{spec.name}: generation {generation} could not start beside generation "
                         f"{old_generation} ({str(error).splitlines()[0]}); stopping generation {old_generation} first")
                return False
            self._restore(new, old, spec, generation, old_generation, old_retired=not beside)
            raise KollaError(f"container {spec.name}: generation {generation} failed ({error}); "
                             f"restored generation {old_generation}" + (" (it kept serving)" if beside else "")) from None

    def _retire(self, old, aside):
        """Stops the old generation and keeps it aside; restart policy "no" so that a
        daemon restart cannot revive it."""
        old.stop(timeout=int(declared_spec(old.labels).get("stop_timeout", 10)))
        old.rename(aside)
        old.update(restart_policy={"Name": "no"})

    def _restore(self, new, old, spec, generation, old_generation, old_retired):
        try:
            new.remove(force=True)
        finally:
            history = self.history(spec.name)
            history.set_outcome(generation, generations.FAILED)
            history.drop_snapshot(generation)
            if not old_retired:   # an overlap swap: the old one never stopped
                return
            old.rename(spec.name)
            # The old generation gets back the restart policy it was created with.
            old.update(restart_policy={"Name": declared_spec(old.labels).get("restart_policy", "always")})
            old.start()
            self.out(f"{spec.name}: generation {generation} failed; generation {old_generation} is back")

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

    # -- rollback ------------------------------------------------------------------------
    def rollback(self, name):
        """Returns `name` to its last known good generation, as a new generation."""
        current = self.get(name)
        if current is None:
            raise KollaError(f"rollback: no container named {name}")
        generation = int(current.labels.get(LABEL_GENERATION, 0))
        history = self.history(name)
        target = history.last_good_before(generation)
        if target is None:
            raise KollaError(f"rollback: {name} has no earlier healthy generation to return to "
                             f"(current generation {generation})")
        data = dict(target["spec"])
        # The new generation is started from the config the good one ran with.
        data["config_dir"] = str(history.config_snapshot(target["generation"]))
        spec = ContainerSpec.from_dict(data, where=f"history of {name} generation {target['generation']}")
        new_generation = self._next_generation(name)
        self._swap(spec, new_generation)
        return target["generation"], new_generation

    # -- one-shot jobs --------------------------------------------------------------------
    def _job_hash(self, spec):
        image = self._check_image(spec)
        return f"{spec.spec_hash()}-{image.id[7:19]}-{config_hash(read_config_files(spec.config_dir))}"

    def _job_record_path(self, name):
        return os.path.join(self.state_dir, "jobs", f"{name}.done")

    def _jobs_done(self, name):
        path = self._job_record_path(name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().split()

    def job_pending(self, spec):
        """A job runs only when this combination of spec, image and config has not succeeded
        on this host recently. Remembering more than the last one means that going back to a
        known image (after a failed upgrade, or a rollback) does not run its job again, e.g.
        an older db_sync against a schema already migrated forward."""
        return self._job_hash(spec) not in self._jobs_done(spec.name)

    def run_job(self, spec, timeout=600):
        """Runs a one-shot container to completion; raises JobFailed with its (redacted)
        output on a non-zero exit. Returns the output."""
        job_hash = self._job_hash(spec)
        leftover = self.get(spec.name)
        if leftover is not None and leftover.labels.get(LABEL_JOB):
            leftover.remove(force=True)
        args = self._docker_args(spec)
        if spec.config_dir:
            args["volumes"][spec.config_dir] = {"bind": CONFIG_MOUNT, "mode": "ro"}
        args["restart_policy"] = None
        args.pop("healthcheck")
        container = self.client.containers.create(
            name=spec.name, labels={**spec.labels, LABEL_JOB: "true", LABEL_SET: spec.set_path}, **args)
        try:
            container.start()
            result = container.wait(timeout=timeout)
            output = redact(container.logs().decode(errors="replace"), self.secrets)
        finally:
            container.remove(force=True)
        if result.get("StatusCode") != 0:
            raise JobFailed(f"job {spec.name} exited with code {result.get('StatusCode')}:\n{output[-3000:]}")
        done = [h for h in self._jobs_done(spec.name) if h != job_hash][-(JOBS_REMEMBERED - 1):]
        path = self._job_record_path(spec.name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(done + [job_hash]) + "\n")
        return output
