"""State module: kolla_backup.before_migrations, an upgrade's backup on one host.

A thin adapter over the execution function of the same name: the state reports the
backup it took (or, under test=True, the one it would take) and fails the run,
before any migration, when the backup failed."""
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
