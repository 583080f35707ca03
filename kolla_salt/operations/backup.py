"""Database backups and restores with mariabackup (docs/operations.md: "Database backups").

A backup is a folder under the backup directory (globals.yml mariadb_backup_directory),
named by the time it was taken:
  mariadb.xb.gz   the member's datadir as `mariadb-backup --backup --stream=xbstream`,
                  gzipped; taken by docker exec in the running member (its user, its
                  server's own mariabackup), so the database keeps serving
  secrets.tar     the operator folder's files the data depends on (DATA_SECRETS), 0600
  manifest.json   when, why, from which member, the release of every container, the
                  binlog position and LSNs, the size and sha256 of both files,
                  fingerprints of the data's secrets, and the records of the jobs that
                  fill the database (what they had done then)
A backup is written as NAME.partial and renamed once whole: a killed backup is never
listed, and the next one clears it. A restore checks the archive's sha256, the
releases and the secrets before it stops anything.

Through a master (a Galera cluster, salt/_runners/kolla_galera.py) the archive and
the manifest stay on the member's host that was copied, and secrets.tar stays on the
master beside the operator folder it comes from: secrets never travel through Salt.
On a Galera member the copy runs desynced (`desynced`): the cluster does not wait for
it, and haproxy sends it no client meanwhile.
"""
import collections
import contextlib
import datetime
import fcntl
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
from pathlib import Path

from ..declaration.pins import changed, fingerprints
from ..errors import KollaError, ValidationError
from ..private import redact, write_private
from .galera import DATADIR, query

ARCHIVE = "mariadb.xb.gz"
SECRETS = "secrets.tar"
MANIFEST = "manifest.json"
PARTIAL = ".partial"
# What of the operator folder the data needs: the services' database and keystone
# passwords are stored in the database (mysql.user, keystone's users), and keystone's
# credential keys encrypt its credential rows. A restore with other ones would leave
# services locked out or rows unreadable. (Fernet token keys are not data: tokens are
# not stored.) Both go into secrets.tar; the manifest keeps fingerprints to compare.
CREDENTIAL_KEYS = "keys/keystone/credential"
DATA_SECRETS = ("passwords.yml", CREDENTIAL_KEYS)
# In the member, as its user: the stream on stdout, gzipped there (less through the
# Docker API); the LSNs and binlog position beside it, read afterwards.
LSN_DIR = "/tmp/kolla-backup"
BACKUP_SCRIPT = (f"rm -rf {LSN_DIR} && mariadb-backup --defaults-extra-file=/etc/mysql/kolla-client.cnf --backup "
                 f"--stream=xbstream --target-dir=/tmp --extra-lsndir={LSN_DIR} {{incremental}}| gzip -1")
PROGRESS_SECONDS = 10


SYNCED_SECONDS = 300
# The `why` of every backup the schedule takes starts with it: only those are pruned.
SCHEDULED = "scheduled"

Database = collections.namedtuple("Database", "backups member writers jobs")


def database_parts(services, prefix):
    """(the name of the container holding the datadir, the containers of the services
    that write to the database in deploy order, the jobs here that fill it) of a host's
    pillar services (None for the first when mariadb is not on that host). A service
    whose jobs fill the database volume (`fills`, on every host of the service) keeps
    its data there (kolla_salt.declaration.inventory)."""
    from ..declaration.settings import database_service
    from .galera import member
    name = database_service()
    database = prefix + name   # its volume
    found = next((s for s in services if s["name"] == name), None)
    writers = [c["spec"]["name"] for s in services if database in s.get("fills", ()) for c in s["containers"]]
    jobs = [job["name"] for s in services for job in s["jobs"] + s["post_jobs"] + s.get("final_jobs", [])
            if database in (job.get("fills") or ())]
    return member(found)["spec"]["name"] if found else None, writers, jobs


def changing_releases(services, running):
    """The releases `services` (pillar entries) go to that a container of theirs does
    not run yet (`running`: {container: release}): a run that changes them migrates
    schemas forward, which no container rollback takes back, so the database is
    backed up first."""
    return {s["release"] for s in services for c in s["containers"]
            if running.get(c["spec"]["name"], s["release"]) != s["release"]}


def back_first(services, prefix, ahead):
    """The names of `services` (deploy order) after the last one that writes to the
    database with a container in `ahead` (those running a newer release): what a
    release upgrade took forward last (the compute set). A rollback across a release
    stops them first, last first, before the writers: a newer nova-compute beside an
    older conductor is a skew nova refuses. They start again at the older release once
    the database is back, not before: an older nova service exits at its start while
    the database records the newer version of its service (ServiceTooOld)."""
    from ..declaration.settings import database_service
    database = prefix + database_service()
    writing = [index for index, service in enumerate(services) if database in service.get("fills", ())]
    after = services[writing[-1] + 1:] if writing else []
    return [service["name"] for service in after
            if any(container["spec"]["name"] in ahead for container in service["containers"])]


def rollback_plan(kept, running, release, services, prefix):
    """What `rollback --release RELEASE` puts back (the CLI and salt-run state.orchestrate
    kolla.rollback_release): {"host", "backup", "first"}: the newest backup of `kept`
    ({host: its manifests}; host None on one host) that fits every container of
    `running` ({[HOST:]CONTAINER: release}) at RELEASE (an upgrade takes one before its
    migrations), and the services of `services` (the declaration's, deploy order) that
    stop before the writers (back_first). A ValidationError when nothing runs a release
    newer than RELEASE, or no backup was taken under it."""
    from ..declaration.releases import load_releases, series
    releases = load_releases()
    if not any(series(releases, r) > series(releases, release) for r in running.values()):
        raise ValidationError([f"--release: nothing runs a release newer than {release}: `rollback --release` goes "
                               f"back after an upgrade (`upgrade --release` goes forward)"])
    back = dict.fromkeys(running, release)
    fitting = sorted(((taken_at(m), str(h), h, m["name"]) for h, found in kept.items() for m in found
                      if not release_problems(m, back)), key=lambda each: each[:2])
    if not fitting:
        where = ", ".join(h for h in kept if h) or "this host"
        raise ValidationError([f"--release {release}: no backup on {where} was taken under {release} (an upgrade "
                               f"takes one before its migrations): the database cannot go back with the containers, "
                               f"so nothing was changed"])
    *_, host, name = fitting[-1]
    ahead = {key.split(":", 1)[-1] for key, then in running.items() if then != release}
    return {"host": host, "backup": name, "first": back_first(services, prefix, ahead)}


def restore_stops(services, prefix, first=()):
    """The containers here a restore stops, in order: those of the services `first`
    names (a release rollback's back_first), last first, then the writers in reverse
    deploy order, then the caches of what the database held (a service folder's
    `caches_database`: memcached), which start again empty, before the writers. A
    cache kept the replaced database's rows: keystone served the catalog of the
    https endpoints after a rollback to a backup of http ones. A deploy starts them
    again."""
    firsts = [container["spec"]["name"] for service in services if service["name"] in first
              for container in service["containers"]]
    caches = [container["spec"]["name"] for service in services if service.get("caches_database")
              for container in service["containers"]]
    return firsts[::-1] + database_parts(services, prefix)[1][::-1] + caches[::-1]


@contextlib.contextmanager
def desynced(member, out=lambda m: None):
    """A Galera member out of the cluster's flow control while the body runs
    (wsrep_desync): the others do not wait for it while mariabackup holds its locks,
    and its clustercheck answers 503 meanwhile, so haproxy sends it no client. Back in
    sync (Synced) before it returns. Yields whether the member is a Galera one."""
    if query(member, "SELECT @@wsrep_on") != "1":
        yield False
        return
    if query(member, "SET GLOBAL wsrep_desync = ON") is None:
        raise KollaError(f"mariadb-backup: {member.name} could not be desynced from its cluster")
    out(f"{member.name}: desynced from the cluster for the copy")
    try:
        yield True
    finally:
        query(member, "SET GLOBAL wsrep_desync = OFF")
        deadline = time.monotonic() + SYNCED_SECONDS
        while (state := query(member, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
                                      "VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'")) != "Synced":
            if time.monotonic() > deadline:
                raise KollaError(f"mariadb-backup: {member.name} is {state} {SYNCED_SECONDS} s after the copy, "
                                 f"not Synced")
            time.sleep(0.5)
        out(f"{member.name}: Synced again")


def database_here(client, pillar, where):
    """This host's Database: the Backups of this deployment, its mariadb member
    container, the containers of the services that write to the database in deploy
    order, the jobs that fill it. `where`: the globals.yml an error names."""
    settings = pillar["kolla"]["settings"]
    name, writers, jobs = database_parts(pillar["kolla"]["services"], settings["container_name_prefix"])
    if name is None:
        raise ValidationError([f"{where}: mariadb is not deployed on this host (enable_mariadb, roles)"])
    container = next(iter(client.containers.list(all=True, filters={"name": f"^{name}$"})), None)
    if container is None:
        raise KollaError(f"{name}: no such container; `kolla-salt deploy` makes it")
    return Database(Backups(backup_directory(settings)), container, writers, jobs)


def take_here(client, pillar, config_dir, why, database=None, incremental=False, out=lambda m: None):
    """A backup of this host's database (`database`: its database_here, when the caller
    has it), the operator folder `config_dir` on this host; returns its manifest."""
    from ..containers.manager import ContainerManager
    from ..declaration.releases import running_releases
    from ..declaration.settings import load_passwords
    database = database or database_here(client, pillar, Path(config_dir) / "globals.yml")
    settings = pillar["kolla"]["settings"]
    releases = running_releases(client, settings["container_name_prefix"])
    jobs = ContainerManager.from_settings(settings, client=client).job_records(database.jobs)
    return database.backups.take(client, database.member, releases, why, data_secrets(config_dir), jobs=jobs,
                                 out=out, redacted=load_passwords(config_dir).values(), config_dir=config_dir,
                                 incremental=incremental)


def host_releases(facts):
    """{HOST:CONTAINER: the release it runs} from every host's kolla_container.facts
    (hosts that did not answer are left out), as a backup's `releases` through a
    master; {CONTAINER: release} on one host (facts keyed None), as a backup's there."""
    return {f"{host}:{name}" if host else name: release for host, found in sorted(facts.items(), key=str)
            if isinstance(found, dict) for name, release in (found.get("releases") or {}).items()}


def master_secrets(config_dir, name):
    """Where a backup taken through a master keeps the secrets its data depends on: on
    the master, beside the operator folder they come from (never through Salt)."""
    return Path(config_dir) / "mariadb-backups" / name / SECRETS


def migrations_why(releases, command):
    """The reason an upgrade's backup gives (one host's state, a master's runner)."""
    return f"before the upgrade to {', '.join(sorted(releases))} ({command})"


def scheduled_why(settings):
    return f"{SCHEDULED} (mariadb_backup_interval_minutes: {settings['mariadb_backup_interval_minutes']})"


def forgotten(member, services, manifest):
    """{what: (why, [each one])}: what a restore of backup `manifest` into the running
    `member` would forget while it lives on outside the database, asked with the
    restore_forgets queries (kolla_salt.declaration.inventory: every enabled service's, on the
    mariadb entry of the pillar `services`) for what was made since the backup; a
    query that fails (its database is not there) names nothing."""
    taken = datetime.datetime.fromisoformat(manifest["taken"]).astimezone(datetime.timezone.utc)
    found = {}
    for service in services:
        for what, entry in (service.get("restore_forgets") or {}).items():
            rows = query(member, entry["query"].replace("{taken}", taken.strftime("%Y-%m-%d %H:%M:%S")))
            if rows:
                found[what] = (entry["why"], rows.splitlines())
    return found


def taken_at(manifest):
    """When a backup was taken, in seconds since the epoch."""
    return datetime.datetime.fromisoformat(manifest["taken"]).timestamp()


def due(manifests, minutes, now=None):
    """Whether the schedule takes a backup: none of `manifests` (any kind, any reason)
    was taken in the last `minutes`."""
    now = now if now is not None else time.time()
    newest = max((taken_at(m) for m in manifests), default=None)
    return newest is None or now - newest >= minutes * 60


def backup_directory(settings):
    """The folder backups live in: mariadb_backup_directory, else beside the state."""
    return Path(settings["mariadb_backup_directory"]
                or os.path.join(settings["kolla_state_directory"], "mariadb-backups"))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def credential_keys(config_dir):
    """{path relative to the operator folder: sha256} of keystone's credential keys."""
    keys = Path(config_dir) / CREDENTIAL_KEYS
    return {str(p.relative_to(config_dir)): sha256_of(p) for p in sorted(keys.rglob("*")) if p.is_file()}


def data_secrets(config_dir):
    """{passwords: a salted fingerprint of each password (kolla_salt.declaration.pins), keys:
    credential_keys}: what a restore compares."""
    from ..declaration.settings import load_passwords
    return {"passwords": fingerprints(load_passwords(config_dir)), "keys": credential_keys(config_dir)}


def key_values(text):
    """mariadb_backup_info / mariadb_backup_checkpoints (xtrabackup_* before MariaDB 11): `key = value` lines."""
    pairs = (line.partition("=") for line in text.splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def datadir_volume(member):
    """The named volume the member (a container) holds its datadir in."""
    volume = next((m["Name"] for m in member.attrs["Mounts"] if m["Destination"] == DATADIR and m["Type"] == "volume"),
                  None)
    if volume is None:
        raise KollaError(f"{member.name}: no named volume at {DATADIR}")
    return volume


def datadir_bytes(client, member):
    """How much the member's datadir holds (the volume's folder on this host)."""
    source = client.volumes.get(datadir_volume(member)).attrs["Mountpoint"]
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(source) for f in files
               if not os.path.islink(os.path.join(root, f)))


def write_new(path, chunks):
    """Writes `chunks` (bytes) to the new file `path`, 0600 from its first byte and on
    disk before it returns; {file, bytes, sha256}."""
    digest, written = hashlib.sha256(), 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
            digest.update(chunk)
            written += len(chunk)
        f.flush()
        os.fsync(f.fileno())
    return {"file": Path(path).name, "bytes": written, "sha256": digest.hexdigest()}


class Backups:
    """The backups of one directory."""

    def __init__(self, directory, where="globals.yml: mariadb_backup_directory"):
        self.directory = Path(directory)
        self.where = where

    @contextlib.contextmanager
    def locked(self):
        """One backup or restore at a time on a directory."""
        self.writable()
        with open(self.directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def writable(self):
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise ValidationError([f"{self.where}: {self.directory} cannot be made: {error.strerror}"])
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise ValidationError([f"{self.where}: {self.directory} is not writable"])

    def list(self):
        """The manifests of the whole backups, oldest first."""
        found = []
        if self.directory.is_dir():
            for folder in sorted(self.directory.iterdir()):
                if folder.is_dir() and not folder.name.endswith(PARTIAL) and (folder / MANIFEST).is_file():
                    with contextlib.suppress(ValueError, OSError):
                        found.append(json.loads((folder / MANIFEST).read_text()))
        return found

    def find(self, name):
        """The manifest of backup `name` whose files are whole (sizes and sha256 as
        recorded); raises ValidationError naming what is wrong."""
        folder = self.directory / name
        if "/" in name or not (folder / MANIFEST).is_file():
            known = ", ".join(m["name"] for m in self.list()) or "none"
            raise ValidationError([f"{name}: no such backup in {self.directory} ({self.where}); backups: {known}"])
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except ValueError as error:
            raise ValidationError([f"{folder / MANIFEST}: unreadable ({error})"])
        if manifest.get("kind") == "incremental":
            try:
                self.find(manifest["base"])
            except ValidationError as error:
                raise ValidationError([f"backup {name} holds only what changed since backup {manifest['base']}, "
                                       f"which is not whole: {'; '.join(error.problems)}"])
        for part in ("archive", "secrets_archive"):
            if part == "secrets_archive" and manifest.get(part) is None:   # kept on the master
                continue
            recorded = manifest.get(part) or {}
            path = folder / recorded.get("file", "?")
            if not path.is_file():
                raise ValidationError([f"{path}: missing: backup {name} is partial"])
            if path.stat().st_size != recorded.get("bytes") or sha256_of(path) != recorded.get("sha256"):
                raise ValidationError([f"{path}: its size or sha256 differs from {folder / MANIFEST}'s: backup "
                                       f"{name} is corrupt"])
        return manifest

    def prune(self, kept):
        """Removes the backups the schedule took beyond the newest `kept` of them, never
        one an incremental kept here starts from, nor any other backup; returns the
        names removed."""
        manifests = self.list()
        bases = {m["base"] for m in manifests if m.get("kind") == "incremental"}
        scheduled = [m["name"] for m in manifests if m["why"].startswith(SCHEDULED)]
        removed = [name for name in scheduled[:-kept] if name not in bases]
        with self.locked():
            for name in removed:
                shutil.rmtree(self.directory / name)
        return removed

    def chain(self, manifest):
        """The names of the backups a restore of `manifest` applies, oldest first: a
        full one, or an incremental's base and then it."""
        return [manifest["base"], manifest["name"]] if manifest.get("kind") == "incremental" else [manifest["name"]]

    def base_for_incremental(self):
        """The manifest of the newest full backup (an incremental holds what changed since)."""
        full = [m for m in self.list() if m.get("kind") == "full"]
        if not full:
            raise ValidationError([f"--incremental: {self.directory} holds no full backup to start from "
                                   f"(`kolla-salt mariadb-backup` takes one)"])
        return self.find(full[-1]["name"])

    def take(self, client, member, releases, why, secrets, jobs=None, out=lambda m: None, redacted=(),
             config_dir=None, incremental=False):
        """Backs up the running `member` (a container); returns its manifest.
        `secrets`: data_secrets of the operator folder; `config_dir`: that folder when it
        is on this host (its DATA_SECRETS go into secrets.tar), else None. `jobs`: the
        records of the jobs that fill the database (ContainerManager.job_records; {host:
        records} through a master), which a restore puts back with the data.
        `redacted`: the passwords mariabackup's log may show. `incremental`: only the
        pages changed since the newest full backup (from its LSN on)."""
        if member.status != "running":
            raise KollaError(f"mariadb-backup: {member.name} is not running ({member.status}): mariabackup copies "
                             f"from a running server")
        needed = datadir_bytes(client, member)
        with self.locked():
            base = self.base_for_incremental() if incremental else None
            free = shutil.disk_usage(self.directory).free
            if free < needed:
                raise ValidationError([f"{self.where}: {self.directory} has {free >> 20} MiB free; the datadir of "
                                       f"{member.name} holds {needed >> 20} MiB (a backup may need as much)"])
            for stale in self.directory.glob(f"*{PARTIAL}"):
                shutil.rmtree(stale)
            started = time.time()
            name = datetime.datetime.fromtimestamp(started, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            if (self.directory / name).exists():
                raise KollaError(f"mariadb-backup: {self.directory / name} exists already (one backup a second)")
            folder = self.directory / (name + PARTIAL)
            folder.mkdir(mode=0o700)
            out(f"{member.name}: mariabackup streams its datadir ({needed >> 20} MiB) to {self.directory / name}")
            since = f"--incremental-lsn={int(base['position']['to_lsn'])} " if base else ""
            with desynced(member, out) as galera:
                archive = self._stream(client, member, folder / ARCHIVE, BACKUP_SCRIPT.format(incremental=since),
                                       out, redacted)
            # MariaDB 11 (trixie) names them mariadb_backup_checkpoints and _info; 10.11 xtrabackup_*.
            info = key_values(self._read(member, f"cat {LSN_DIR}/*backup_checkpoints {LSN_DIR}/*backup_info "
                                                 f"&& rm -rf {LSN_DIR}"))
            secrets_archive = write_secrets(config_dir, folder / SECRETS) if config_dir else None
            manifest = {
                "name": name, "kind": "incremental" if base else "full", **({"base": base["name"]} if base else {}),
                "why": why,
                "taken": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
                "seconds": round(time.time() - started, 1), "member": member.name, "desynced": galera,
                "image": member.attrs["Config"]["Image"],   # what it runs (tags[0] may be a registry's)
                "releases": releases,
                "position": {key: info[key] for key in ("binlog_pos", "from_lsn", "to_lsn", "last_lsn",
                                                        "server_version") if key in info},
                "datadir_bytes": needed, "archive": archive, "secrets_archive": secrets_archive,
                "secrets": secrets, "jobs": jobs or {},
            }
            write_private(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n", durable=True)
            os.rename(folder, self.directory / name)
        out(f"backup {name}: {archive['bytes'] >> 20} MiB in {manifest['seconds']} s")
        return manifest

    @staticmethod
    def _stream(client, member, path, script, out, redacted):
        """Runs `script` (BACKUP_SCRIPT) in the member, its stdout into `path` (0600); {file, bytes, sha256}."""
        exec_id = client.api.exec_create(member.id, ["bash", "-o", "pipefail", "-c", script],
                                         user="mysql")["Id"]
        log = []

        def stdout():
            """The stream's stdout; its stderr (mariabackup's log) kept; progress said."""
            written, said = 0, time.monotonic()
            for data, errors in client.api.exec_start(exec_id, stream=True, demux=True):
                log.append(errors or b"")
                written += len(data or b"")
                if time.monotonic() - said >= PROGRESS_SECONDS:
                    said = time.monotonic()
                    out(f"{member.name}: {written >> 20} MiB written")
                yield data or b""

        archive = write_new(path, stdout())
        code = client.api.exec_inspect(exec_id)["ExitCode"]
        if code != 0:
            text = redact(b"".join(log).decode(errors="replace"), redacted)
            raise KollaError(f"mariadb-backup: mariabackup in {member.name} failed (exit {code}); the partial "
                             f"backup {path.parent} goes at the next one:\n" + "\n".join(text.splitlines()[-15:]))
        return archive

    @staticmethod
    def _read(member, command):
        result = member.exec_run(["sh", "-c", command], user="mysql")
        return result.output.decode(errors="replace") if result.exit_code == 0 else ""



def write_secrets(config_dir, path):
    """DATA_SECRETS' files of the operator folder in a new tar at `path` (0600); {file,
    bytes, sha256}."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for relative in DATA_SECRETS:
            if (Path(config_dir) / relative).exists():
                tar.add(Path(config_dir) / relative, arcname=relative)
    return write_new(path, [buffer.getvalue()])


def release_problems(manifest, releases):
    """Why backup `manifest` does not fit containers at `releases` ({container: release}):
    a backup taken under other releases holds other schemas."""
    differing = {name: (then, releases[name]) for name, then in manifest["releases"].items()
                 if name in releases and releases[name] != then}
    return [f"backup {manifest['name']} was taken under other releases ("
            + ", ".join(f"{name}: {then} then, {now} now" for name, (then, now) in differing.items())
            + "): its schemas are not those the services expect"] if differing else []


def secret_problems(manifest, config_dir, folder):
    """The operator folder's data secrets must be those backup `manifest` was taken
    with: no password it knew changed or gone (a password added since is no matter),
    the same credential keys."""
    from ..declaration.settings import load_passwords
    then, keys = manifest["secrets"], credential_keys(config_dir)
    differing = [f"passwords.yml: {key}" for key in changed(then["passwords"], load_passwords(config_dir))]
    differing += sorted(path for path in set(keys) | set(then["keys"]) if keys.get(path) != then["keys"].get(path))
    return [f"{config_dir}: {', '.join(differing)} differ from what backup {manifest['name']} was taken with (its "
            f"data depends on them: {folder / SECRETS} holds those; put them back first)"] if differing else []


def restore_datadir(client, member, directory, chain, out=lambda m: None):
    """Runs kolla_mariadb_restore in a one-shot container of the member's image, the
    member stopped: its datadir volume read-write, the backup directory read-only, no
    network. `chain`: the backups to apply (Backups.chain). Raises KollaError with its
    output's end when it fails."""
    volume = datadir_volume(member)
    # Left by a restore killed while it ran: the restore starts again.
    for leftover in client.containers.list(all=True, filters={"name": f"^{member.name}_restore$"}):
        leftover.remove(force=True)
    # root: the prepared files are moved in and given to mysql (chown).
    job = client.containers.run(member.image.id, ["kolla_mariadb_restore"] + [f"/backup/{name}/{ARCHIVE}" for name in chain],
                                entrypoint=[], user="root", network_mode="none", detach=True,
                                name=f"{member.name}_restore",
                                volumes={volume: {"bind": DATADIR, "mode": "rw"},
                                         str(directory): {"bind": "/backup", "mode": "ro"}})
    try:
        code = job.wait(timeout=3600)["StatusCode"]
        output = job.logs().decode(errors="replace")
    finally:
        job.remove(force=True)
    for line in output.splitlines():
        if line.startswith("kolla_mariadb_restore:"):
            out(f"{member.name}: {line.removeprefix('kolla_mariadb_restore: ')}")
    if code != 0:
        raise KollaError(f"mariadb-restore: kolla_mariadb_restore failed (exit {code}):\n"
                         + "\n".join(output.splitlines()[-15:]))
