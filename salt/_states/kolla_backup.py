"""State module: the database's backups and restores inside one host's deploy, where
this host is its own master (through a master the runner kolla_galera takes them,
as steps of the orchestration): kolla_backup.before_migrations, an upgrade's backup,
and kolla_backup.restored, a restore's (mariadb-restore, rollback --release).

Thin adapters over the execution functions: a state reports the backup it took (or,
under test=True, what it would do) and fails the run, before any service changes,
when it failed."""
from salt.exceptions import CommandExecutionError


def before_migrations(name, services=None, command="kolla-salt upgrade"):
    """The database is backed up before this run's `services` (all declared here
    when empty) change release, where this host is its own master: kolla.deploy
    runs it after its checks when the pillar holds `kolla_backup_before_migrations`
    (a one-host `kolla-salt upgrade`; through a master the runner kolla_galera takes
    the cluster's backup before the walk)."""
    ret = {"name": name, "result": False, "changes": {}, "comment": ""}
    try:
        done = __salt__["kolla_backup.before_migrations"](services or [], command)
    except CommandExecutionError as error:
        ret["comment"] = f"no backup before the migrations, so none was run: {error}"
        return ret
    if not done["releases"]:
        ret.update(result=True, comment="no container here changes release: no backup needed")
    elif done["backup"] is None:   # test=True
        ret.update(result=None, changes={"backup": f"would back up the database before the upgrade to "
                                                   f"{', '.join(done['releases'])}"},
                   comment="a backup would be taken before the migrations")
    else:
        ret.update(result=True, changes={"backup": done["backup"]["name"]},
                   comment=f"backup {done['backup']['name']} taken before the migrations")
    return ret


def restored(name, backup, command, first=None):
    """Backup `backup` put back into this host's member, after a backup of the data it
    replaces, before the services start again: kolla.deploy runs it after its checks
    when the pillar holds `kolla_restore` ({backup, first}: a one-host `kolla-salt
    mariadb-restore` or `rollback --release`). The writers (after the services `first`
    names) stay stopped for the deploy's own states to start again on the restored data."""
    ret = {"name": name, "result": False, "changes": {}, "comment": ""}
    if __opts__["test"]:
        ret.update(result=None, changes={"restore": backup},
                   comment=f"the database would be backed up, then backup {backup} put back")
        return ret
    try:
        before = __salt__["kolla_backup.take_here"](f"before restoring {backup} ({command})")
        __salt__["kolla_backup.restore_here"](backup, command, first or [])
    except CommandExecutionError as error:
        ret["comment"] = f"backup {backup} was not put back: {error}"
        return ret
    ret.update(result=True, changes={"backup": before["name"], "restored": backup},
               comment=f"the database holds backup {backup}; what it replaced is backup {before['name']}")
    return ret
