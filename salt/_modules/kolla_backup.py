"""Execution module: backups and restores of this host's mariadb member, for the
master's runner kolla_galera (backup, restore, scheduled) and `kolla-salt
mariadb-backup --list` (through a master, or salt-call on one host), and the schedule of a single host's kolla-salt
daemon (`scheduled`). A thin adapter over kolla_salt.operations.backup: the backup directory,
the container prefix and the passwords to redact come from the `kolla` pillar
(`scheduled` builds its own from the operator folder: that daemon has none), and
`take_here`, `before_migrations` and `restore_here`, where this host is its own master
(salt-call --local)."""
import logging
import sys

from salt.exceptions import CommandExecutionError

from kolla_salt.errors import KollaError, said_as

__virtualname__ = "kolla_backup"
log = logging.getLogger(__name__)
# kolla-salt's refusals as Salt's: Salt says the message, not a traceback.
_refusal = said_as(CommandExecutionError)


def __virtual__():
    return __virtualname__


def _kolla(fresh=False):
    """The kolla pillar this minion holds, or with `fresh` the one the master compiles
    now (an operator's change since the last state run is in it)."""
    from kolla_salt.declaration.inventory import compiled
    return compiled(__salt__["pillar.items"](unmask=True) if fresh else __pillar__)


def _backups():
    from kolla_salt.operations.backup import Backups, backup_directory
    return Backups(backup_directory(_kolla()["settings"]),
                   where=f"{__opts__['id']}: globals.yml: mariadb_backup_directory")


def _manager(out=lambda m: None):
    import docker

    from kolla_salt.containers.manager import ContainerManager
    return ContainerManager.from_settings(_kolla()["settings"], _kolla()["passwords"].values(),
                                          client=docker.from_env(timeout=300), host=__opts__["id"], out=out)


def _progress(command):
    """Progress of a long function under salt-call --local: on its stderr, the CLI's."""
    def said(message):
        print(f"[{command}] {message}", file=sys.stderr, flush=True)
    return said


def _parts():
    from kolla_salt.operations.backup import database_parts
    return database_parts(_kolla()["services"], _kolla()["settings"]["container_name_prefix"])


def _member(manager):
    name = _parts()[0]
    container = manager.get(name) if name else None
    if container is None:
        raise KollaError(f"{__opts__['id']}: no mariadb member here" + (f" ({name} does not exist)" if name else ""))
    return container


def take(why, releases, secrets, jobs, incremental=False):
    """Backs up this host's running member (desynced from its cluster meanwhile);
    returns the manifest. The master gives what it knows of every host: `releases`
    ({HOST:CONTAINER: release}), `secrets` (the operator folder's fingerprints,
    kolla_salt.operations.backup.data_secrets) and `jobs` ({host: job records}). `incremental`:
    what changed since this host's newest full backup."""
    manager = _manager()
    return _backups().take(manager.client, _member(manager), releases, why, secrets, jobs=jobs,
                           redacted=_kolla()["passwords"].values(), incremental=incremental)


@_refusal
def take_here(why, incremental=False):
    """A backup of this host's database where this host is its own master (salt-call
    --local: `kolla-salt mariadb-backup` on one host, and the backups an upgrade and a
    restore take there): the operator folder is on this host, and the secrets the
    data needs are kept beside the backup (kolla_salt.operations.backup.take_here). Its manifest;
    the progress on salt-call's stderr."""
    import docker

    from kolla_salt.operations.backup import take_here as take
    return take(docker.from_env(timeout=300), {"kolla": _kolla()}, __opts__["kolla_config_dir"], why,
                incremental=incremental, out=_progress("mariadb-backup"))


@_refusal
def before_migrations(services, command):
    """Where this host is its own master (an upgrade on one host, inside its deploy's
    salt-call, after the run's checks): a backup of the database, when mariadb runs
    here and a container of `services` (all declared here when empty) is about to
    change release (kolla_salt.operations.backup.changing_releases). {releases: those changing
    to, backup: its manifest, None when none was needed}; under test=True none is
    taken."""
    if not _parts()[0]:
        return {"releases": [], "backup": None}
    releases = changing(services)
    if not releases or __opts__["test"]:
        return {"releases": releases, "backup": None}
    from kolla_salt.operations.backup import migrations_why
    return {"releases": releases, "backup": take_here(migrations_why(releases, command))}


def changing(services=None, fresh=False):
    """The releases this host's `services` (all declared here when empty) go to that a
    container of theirs does not run yet (kolla_salt.operations.backup.changing_releases):
    an upgrade through a master backs the database up first when a host says one
    (the runner kolla_galera.before_migrations, with `fresh`: the declaration as the
    master compiles it now, not as this minion last held it)."""
    import docker

    from kolla_salt.declaration.releases import running_releases
    from kolla_salt.operations.backup import changing_releases
    kolla = _kolla(fresh)
    selected = [s for s in kolla["services"] if not services or s["name"] in services]
    running = running_releases(docker.from_env(timeout=300), kolla["settings"]["container_name_prefix"])
    return sorted(changing_releases(selected, running))


@_refusal
def restore_here(name, command, first=None):
    """A restore where this host is its own master (salt-call --local: `kolla-salt
    mariadb-restore` and `rollback --release` on one host, after their checks and the
    backup of what it replaces): stops the writers (reverse deploy order, drained;
    after the services `first` names: kolla_salt.operations.backup.restore_stops) and the member,
    puts backup `name` into its datadir with the records of the jobs that fill it, and
    starts the member. The writers stay stopped for the deploy that follows, as a
    master's restore leaves them; when the restore failed they start again, on the
    data they left. The host's health loop restarts nothing meanwhile (a stopped
    member fails its check). The progress on salt-call's stderr, as `command`'s."""
    from kolla_salt.healing import healthloop
    out = _progress(command)
    manager = _manager(out)
    manifest = _backups().find(name)
    member = _member(manager)
    with healthloop.ledger(_kolla()["settings"]).paused_restarts():
        stopped = _writers_stopped(manager, first)
        restored = False
        try:
            manager.stop_each([member.name])
            _datadir_restored(manager, manifest, out)
            manager.set_job_records(manifest["jobs"])   # what the jobs had done to the data then
            restored = True
        finally:
            manager.start_each([member.name] + ([] if restored else stopped[::-1]))
    return True


@_refusal
def list_():
    """The manifests of this host's whole backups, oldest first."""
    return _backups().list()


@_refusal
def find(name):
    """The manifest of backup `name` once its files check out; raises naming what is wrong."""
    return _backups().find(name)


@_refusal
def forgotten(name):
    """What a restore of backup `name` into this host's member would forget while it
    lives on outside the database: {what: [why, [each one]]} (kolla_salt.operations.backup.forgotten)."""
    from kolla_salt.operations.backup import forgotten as asked
    return {what: [why, each] for what, (why, each)
            in asked(_member(_manager()), _kolla()["services"], find(name)).items()}


def job_records():
    """The records of the jobs that fill the database here (what a backup keeps)."""
    return _manager().job_records(_parts()[2])


def set_job_records(records):
    """Puts back the job records a backup kept for this host."""
    _manager().set_job_records(records or {})
    return True


def stop_writers(first=None):
    """Stops the containers here that write to the database, in reverse deploy order
    (drained first), after those of the services `first` names (a release rollback's
    compute set: kolla_salt.operations.backup.restore_stops); returns their names. `deploy`
    starts them again."""
    return _writers_stopped(_manager(), first)


def restore(name):
    """Puts backup `name` into this host's member's datadir (the member stopped)."""
    said = []
    _datadir_restored(_manager(), find(name), said.append)
    return said


def _writers_stopped(manager, first):
    """stop_writers' work, with `manager` (its progress where the caller says)."""
    from kolla_salt.operations.backup import restore_stops
    return manager.stop_each(restore_stops(_kolla()["services"], _kolla()["settings"]["container_name_prefix"],
                                           first or ()))


def _datadir_restored(manager, manifest, out):
    """restore's work: the backup of `manifest` (with those it builds on) into the
    stopped member's datadir, under the backups' lock."""
    from kolla_salt.operations.backup import restore_datadir
    backups = _backups()
    with backups.locked():
        restore_datadir(manager.client, _member(manager), backups.directory, backups.chain(manifest), out=out)


def prune(kept):
    """Removes the scheduled backups here beyond the newest `kept`; returns their names."""
    return _backups().prune(int(kept))


def scheduled(config_dir):
    """One host's schedule (kolla_salt.healing.healthloop: every minute in the host's kolla-salt
    daemon): a full backup when none here is younger than mariadb_backup_interval_minutes,
    then the scheduled ones beyond mariadb_backups_kept go. {"taken", "removed"} or
    {"due": False}."""
    import socket

    import docker

    from kolla_salt.declaration.inventory import build_pillar
    from kolla_salt.declaration.settings import load_settings
    from kolla_salt.operations.backup import Backups, backup_directory, due, scheduled_why, take_here
    try:
        settings = load_settings(config_dir)
        backups = Backups(backup_directory(settings))
        minutes = settings["mariadb_backup_interval_minutes"]
        if not minutes or not due(backups.list(), minutes):
            return {"due": False}
        manifest = take_here(docker.from_env(timeout=300), build_pillar(config_dir, minion_id=socket.gethostname()),
                             config_dir, scheduled_why(settings), out=log.info)
        removed = backups.prune(settings["mariadb_backups_kept"])
    except Exception:   # in the daemon's log (minion.log): a schedule has no one to answer
        log.exception("kolla_backup.scheduled: the scheduled backup failed")
        raise
    log.info("kolla_backup.scheduled: backup %s taken; scheduled backups removed: %s", manifest["name"],
             ", ".join(removed) or "none")
    return {"taken": manifest["name"], "removed": removed}


__func_alias__ = {"list_": "list"}
