"""One-shot jobs (schema migrations, bootstraps, registrations): a container run to
completion, and the record of its recent successes that decides whether it runs
again (job_pending).

JobRunner is a part of kolla_salt.containers.manager.ContainerManager: it uses the manager's
client, state folder, secrets, get(), _check_image(), _volume_identity() and
_docker_args()."""
import hashlib
import os

from ..errors import JobFailed
from ..private import redact, write_private
from .configfiles import read_config_files
from .engine import create_container
from .spec import CONFIG_MOUNT, LABEL_JOB, LABEL_SET, config_hash

JOBS_REMEMBERED = 5   # successful job runs remembered per job (see job_pending)
# A one-shot job (a schema migration, a bootstrap) gets a quarter of a service
# container's CPU weight (Docker's default 1024): when the host is busy, the
# services that answer users come first and the job takes longer. Idle, it gets
# every core it can use.
JOB_CPU_SHARES = 256


class JobRunner:
    def _job_identity(self, spec):
        """What a job's success is remembered by: its spec, image id and config, and the
        volumes it fills (a removed and recreated volume is a new one: the job runs).
        A job that `converges` says its spec hash first: job_pending compares it."""
        filled = [self._volume_identity(v) for v in sorted(set(spec.named_volumes()) | set(spec.fills))]
        parts = [spec.spec_hash(), self._check_image(spec).id, config_hash(read_config_files(spec.config_dir)),
                 *filled]
        identity = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
        return f"{spec.spec_hash()}.{identity}" if spec.converges else identity

    def _job_record_path(self, name):
        return os.path.join(self.state_dir, "jobs", f"{name}.done")

    def _jobs_done(self, name):
        path = self._job_record_path(name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().split()

    def job_records(self, names):
        """{job name: the identities of its recent successes} (see job_pending)."""
        return {name: self._jobs_done(name) for name in names}

    def set_job_records(self, records):
        """Puts back what job_records returned: a database restored to an earlier
        backup holds what those jobs had done then, no more."""
        for name, done in records.items():
            path = self._job_record_path(name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_private(path, "".join(f"{identity}\n" for identity in done))

    def job_pending(self, spec):
        """A job runs only when this combination of spec, image, config and filled
        volumes has not succeeded on this host recently. Remembering more than the
        last one means that going back to a known image (after a failed upgrade, or a
        rollback) does not run its job again, e.g. an older db_sync against a schema
        already migrated forward. A job that `converges` also runs when what it
        declares (its spec) differs from its last success's, even going back to one it
        ran before: the catalog follows the endpoints declared again (TLS turned off),
        while a failed upgrade's image, gone again, leaves nothing to do."""
        identity, done = self._job_identity(spec), self._jobs_done(spec.name)
        declared_since = spec.converges and done and done[-1].split(".")[0] != identity.split(".")[0]
        return identity not in done or bool(declared_since)

    def run_job(self, spec, timeout=600):
        """Runs a one-shot container to completion; raises JobFailed with its (redacted)
        output on a non-zero exit. Returns the output."""
        leftover = self.get(spec.name)
        if leftover is not None and leftover.labels.get(LABEL_JOB):
            leftover.remove(force=True)
        args = self._docker_args(spec)
        if spec.config_dir:
            args["volumes"][spec.config_dir] = {"bind": CONFIG_MOUNT, "mode": "ro"}
        args["restart_policy"] = None
        args["cpu_shares"] = JOB_CPU_SHARES
        args.pop("healthcheck")
        container = create_container(
            self.client, name=spec.name, labels={**spec.labels, LABEL_JOB: "true", LABEL_SET: spec.set_path}, **args)
        try:
            container.start()
            result = container.wait(timeout=timeout)
            output = redact(container.logs().decode(errors="replace"), self.secrets)
        finally:
            container.remove(force=True)
        if result.get("StatusCode") != 0:
            raise JobFailed(f"job {spec.name} exited with code {result.get('StatusCode')}:\n{output[-3000:]}")
        # After the run: the volumes it mounts exist now (ensure_volumes made them).
        self.record_success(spec)
        return output

    def record_success(self, spec):
        """Remembers that job `spec` succeeded as it is now, as its last success."""
        identity = self._job_identity(spec)
        done = [h for h in self._jobs_done(spec.name) if h != identity][-(JOBS_REMEMBERED - 1):]
        self.set_job_records({spec.name: done + [identity]})
