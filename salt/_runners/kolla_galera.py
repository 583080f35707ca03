"""Runner: MariaDB Galera across hosts (docs/design.md: "MariaDB Galera").

    salt-run kolla_galera.converge TARGET [concurrent=True]   (a step of kolla.deploy / kolla.upgrade)
    salt-run kolla_galera.recover TARGET      (kolla-salt mariadb-recovery)
    salt-run kolla_galera.backup TARGET WHY [incremental=True]   (kolla-salt mariadb-backup)
    salt-run kolla_galera.scheduled           (the master's schedule: mariadb_backup_interval_minutes)
    salt-run kolla_galera.restore TARGET HOST BACKUP [first=LIST]   (a step of kolla.restore / kolla.rollback_release)
    salt-run kolla_galera.before_migrations TARGET WHY [services=LIST]   (a step of kolla.upgrade)
    salt-run kolla_galera.rollback_plan RELEASE   (what kolla.rollback_release puts back)

converge and recover ask every member's host what it holds (kolla_galera.facts /
position), decide with kolla_salt.operations.galera, then apply kolla.mariadb host by host: the
founding member first, each one healthy (Synced) before the next starts. backup copies
the last Synced member (haproxy sends every client to the first), desynced meanwhile;
restore founds the cluster again from the member that holds the backup; before_migrations
backs it up when an upgrade is about to change a container's release. The return holds each
host's state returns under "ret", as a salt.state step's does; a refusal or a
failure sets the runner's retcode, naming the host and why.
"""
from pathlib import Path

from kolla_salt.roads.rollout import ask

SLS = "kolla.mariadb"


def _client():
    import salt.client
    return salt.client.get_local_client(mopts=__opts__)


def _last_line(answer):
    """The message of a minion's traceback (or of any other answer)."""
    lines = str(answer or "no answer").strip().splitlines()
    return lines[-1] if lines else "no answer"


def _fail(result, message):
    __context__["retcode"] = 1
    result["error"] = message
    return result


def _start_in_order(client, bootstrap, order, result, concurrent=False):
    """Applies kolla.mariadb on each host of `order`, marking `bootstrap` to found the
    cluster; `concurrent`: beside the other state runs of a deploy's walk."""
    for host in order:
        if host == bootstrap:
            ask(client, [host], "kolla_galera.mark_bootstrap")
        states = ask(client, [host], "state.apply", [SLS], kwarg={"concurrent": True} if concurrent else None,
                     timeout=1200, attempts=1).get(host)   # never twice
        if host == bootstrap:   # consumed by the start; left only when nothing started (never found later)
            ask(client, [host], "kolla_galera.mark_bootstrap", [False])
        result["ret"][host] = states if isinstance(states, dict) else {"error": {
            "name": SLS, "result": False, "changes": {}, "comment": str(states or "the minion did not answer")}}
        failed = [ret for ret in result["ret"][host].values() if isinstance(ret, dict) and ret.get("result") is False]
        if failed or not isinstance(states, dict):
            return _fail(result, f"host {host}: mariadb did not come up; the hosts after it were not touched")
    return result


def _guarded(action):
    """Any exception fails the runner (Salt would report a raised one as a success of
    the orchestration step)."""
    def run(target, **kwargs):
        result = {"ret": {}, "hosts": []}
        try:
            return action(target, result, **{k: v for k, v in kwargs.items() if not k.startswith("__")})
        except Exception as error:  # reported to the operator, with its type
            return _fail(result, f"{action.__name__}: {type(error).__name__}: {error}")
    run.__doc__ = action.__doc__
    return run


def _converge(target, result, concurrent=False):
    """Deploys the Galera cluster of the hosts TARGET matches: bootstrap, join or refuse
    (`concurrent`: beside the other state runs of a deploy's walk, kolla_salt.roads.rollout.walk)."""
    from kolla_salt.operations import galera
    client, hosts = _client(), __salt__["kolla_rollout.hosts"](target)
    result["hosts"] = hosts
    if len(hosts) < 2:   # one server, no Galera: a plain state run
        return _start_in_order(client, None, hosts, result, concurrent)
    facts = ask(client, hosts, "kolla_galera.facts")
    try:
        bootstrap, order = galera.plan(facts, hosts)
    except galera.GaleraRefused as refused:
        return _fail(result, str(refused))
    result["plan"] = {"bootstrap": bootstrap, "order": order}
    return _start_in_order(client, bootstrap, order, result, concurrent)


def _recover(target, result):
    """Stops every member, bootstraps from the one with the highest committed position
    and starts the others one at a time."""
    import time

    from kolla_salt.operations import galera
    client, hosts = _client(), __salt__["kolla_rollout.hosts"](target)
    started = time.monotonic()
    result["hosts"] = hosts
    stopped = ask(client, hosts, "kolla_galera.stop", timeout=300)
    positions = ask(client, hosts, "kolla_galera.position", timeout=300)
    silent = [h for h in hosts if not isinstance(positions.get(h), dict)]
    if silent:
        return _fail(result, f"mariadb-recovery: {', '.join(silent)} did not report a position "
                             f"({'; '.join(_last_line(positions.get(h)) for h in silent)}); no member was started")
    result.update(stopped=stopped, positions=positions)
    try:
        bootstrap = galera.recovery_choice(positions, hosts)
    except galera.GaleraRefused as refused:
        return _fail(result, str(refused))
    result["plan"] = {"bootstrap": bootstrap, "order": [bootstrap] + [h for h in hosts if h != bootstrap]}
    _start_in_order(client, bootstrap, result["plan"]["order"], result)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _backup(target, result, why, incremental=False):
    """Backs up the last Synced member of TARGET's hosts (kolla_backup.take), with the
    releases of every host's containers and the records of every host's jobs that fill
    the database (`incremental`: what changed since that host's newest full backup);
    the data's secrets stay here, on the master (kolla_salt.operations.backup.master_secrets), the
    manifest gets their fingerprints. result["manifest"], result["host"]."""
    from kolla_salt.operations.backup import data_secrets, host_releases, master_secrets, write_secrets
    config_dir = __opts__["kolla_config_dir"]
    client, members = _client(), __salt__["kolla_rollout.hosts"](target)
    everyone = __salt__["kolla_rollout.hosts"]("*")
    facts = ask(client, members, "kolla_galera.facts")
    serving = [h for h in members if isinstance(facts.get(h), dict) and facts[h]["state"] in ("synced", "standalone")]
    if not serving:
        return _fail(result, "mariadb-backup: no member is Synced (" + "; ".join(
            f"{h}: {facts[h]['state'] if isinstance(facts.get(h), dict) else _last_line(facts.get(h))}"
            for h in members) + "); nothing was copied")
    host = serving[-1]
    releases = host_releases(ask(client, everyone, "kolla_container.facts"))
    jobs = ask(client, everyone, "kolla_backup.job_records")
    manifest = ask(client, [host], "kolla_backup.take", kwarg={
        "why": why, "releases": releases, "secrets": data_secrets(config_dir),
        "jobs": {h: records for h, records in jobs.items() if isinstance(records, dict)},
        "incremental": incremental},
        timeout=3600, attempts=1).get(host)
    result.update(host=host, hosts=members)
    if not isinstance(manifest, dict):
        return _fail(result, f"mariadb-backup on {host}: {_last_line(manifest)}")
    secrets = master_secrets(config_dir, manifest["name"])
    secrets.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_secrets(config_dir, secrets)
    result["manifest"] = manifest
    desynced = ", the member desynced meanwhile" if manifest.get("desynced") else ""
    result["note"] = (f"{host}: backup {manifest['name']} ({manifest['archive']['bytes'] >> 20} MiB in "
                      f"{manifest['seconds']} s{desynced}; {why}); the secrets its data needs: {secrets}")
    return result


def _before_migrations(target, result, why, services=None):
    """An upgrade's first step (kolla.upgrade): a backup of the database of TARGET's
    hosts when a container of `services` (every declared one when empty) on any host
    is about to change release (kolla_backup.changing): migrations that no container
    rollback takes back."""
    client, everyone = _client(), __salt__["kolla_rollout.hosts"]("*")
    said = ask(client, everyone, "kolla_backup.changing", kwarg={"services": services or [], "fresh": True})
    silent = [h for h in everyone if not isinstance(said.get(h), list)]
    if silent:
        return _fail(result, "no backup before the migrations, so none was run: " + "; ".join(
            f"{h}: {_last_line(said.get(h))}" for h in silent))
    from kolla_salt.operations.backup import migrations_why
    changing = {release for releases in said.values() for release in releases}
    if not changing:
        result["note"] = "no container changes release: no backup needed before the migrations"
        return result
    return _backup(target, result, migrations_why(changing, why))


def rollback_plan(release):
    """What `salt-run state.orchestrate kolla.rollback_release pillar='{"kolla_release":
    RELEASE}'` puts back when the pillar holds no plan: the newest backup taken under
    RELEASE and the services that stop first (kolla_salt.operations.backup.rollback_plan),
    once the operator folder declares RELEASE for every service (globals.yml's
    openstack_release, no pin elsewhere: the deploy that follows the restore starts
    what is declared). {"error": why} when it cannot."""
    from kolla_salt.declaration.pins import load_pins
    from kolla_salt.declaration.roles import declared_services, placement
    from kolla_salt.declaration.settings import database_service, load_settings
    from kolla_salt.declaration.tree import all_services
    from kolla_salt.errors import ValidationError
    from kolla_salt.operations.backup import host_releases
    from kolla_salt.operations.backup import rollback_plan as plan
    config_dir = __opts__["kolla_config_dir"]
    try:
        settings, pins = load_settings(config_dir), load_pins(config_dir)
        client, everyone = _client(), __salt__["kolla_rollout.hosts"]("*")
        hosts = {host: {"services": declared_services(settings, pins, host)} for host in everyone}
        services = all_services(hosts)
        elsewhere = sorted({f"{s['name']}: {s['release']}" for s in services if s["release"] != release})
        if elsewhere:
            raise ValidationError([f"{config_dir}/globals.yml: openstack_release (and pins.yml) must declare "
                                   f"{release} for every service before the database goes back "
                                   f"({', '.join(elsewhere)}); `kolla-salt rollback --release {release}` declares it"])
        database = next((s for s in placement(config_dir) if s["database"]), None)
        if database is None:
            raise ValidationError([f"{config_dir}/globals.yml: {database_service()} runs on no host: no backup to "
                                   f"put back"])
        members = __salt__["kolla_rollout.hosts"](database["target"])
        kept = ask(client, members, "kolla_backup.list")
        silent = [h for h in members if not isinstance(kept.get(h), list)]
        if silent:
            raise ValidationError([f"{h}: did not list its backups ({_last_line(kept.get(h))})" for h in silent])
        return plan(kept, host_releases(ask(client, everyone, "kolla_container.facts")), release, services,
                    settings["container_name_prefix"])
    except ValidationError as refused:
        __context__["retcode"] = 1
        return {"error": "; ".join(refused.problems)}


def scheduled():
    """The master's schedule (kolla_salt.roads.node: every minute): a backup of the database
    when none of its members' backups is younger than mariadb_backup_interval_minutes
    (globals.yml; 0: none), then the scheduled ones beyond mariadb_backups_kept go on
    that host (and their secrets here). The time of the newest backup seen is kept in
    the master's cache, so that a minute with nothing due asks no minion."""
    import shutil
    import time

    from kolla_salt.declaration.roles import placement
    from kolla_salt.declaration.settings import load_settings
    from kolla_salt.operations.backup import due, master_secrets, scheduled_why, taken_at
    result = {"ret": {}, "hosts": []}
    try:
        config_dir = __opts__["kolla_config_dir"]
        settings = load_settings(config_dir)
        minutes = settings["mariadb_backup_interval_minutes"]
        seen = Path(__opts__["cachedir"]) / "kolla-backup-newest"
        newest = float(seen.read_text()) if seen.exists() else 0.0
        if not minutes or time.time() - newest < minutes * 60:
            return {"due": False}
        step = next((s for s in placement(config_dir) if s["database"]), None)
        if step is None:
            return {"due": False}
        client, members = _client(), __salt__["kolla_rollout.hosts"](step["target"])
        kept = [m for found in ask(client, members, "kolla_backup.list").values() if isinstance(found, list)
                for m in found]
        if not due(kept, minutes):
            seen.write_text(str(max(taken_at(m) for m in kept)))
            return {"due": False}
        _backup(step["target"], result, scheduled_why(settings))
        if result.get("manifest"):
            seen.write_text(str(time.time()))
            removed = ask(client, [result["host"]], "kolla_backup.prune", [settings["mariadb_backups_kept"]],
                          attempts=1).get(result["host"])
            for name in removed if isinstance(removed, list) else []:
                shutil.rmtree(master_secrets(config_dir, name).parent, ignore_errors=True)
            result["removed"] = removed
        return result
    except Exception as error:  # reported in the master's log and the job's return
        return _fail(result, f"scheduled: {type(error).__name__}: {error}")


def _restore(target, result, host, backup, first=None):
    """Stops the database's writers on every host (after the services FIRST names, a
    release rollback's compute set) and every member, puts backup BACKUP
    into HOST's member, empties the other members' datadirs (they hold rows the
    restored history lacks: they join by a full state transfer), puts back each host's
    job records, and founds the cluster from HOST; the others join one at a time.
    `deploy` starts the writers again."""
    import time
    client, members = _client(), __salt__["kolla_rollout.hosts"](target)
    everyone = __salt__["kolla_rollout.hosts"]("*")
    started = time.monotonic()
    result["hosts"] = members
    manifest = ask(client, [host], "kolla_backup.find", [backup]).get(host)
    if not isinstance(manifest, dict):
        return _fail(result, f"mariadb-restore: {host}: {_last_line(manifest)}; nothing was stopped")
    result["stopped"] = ask(client, everyone, "kolla_backup.stop_writers", kwarg={"first": first or []},
                            timeout=900, attempts=1)
    ask(client, members, "kolla_galera.stop", timeout=300)
    said = ask(client, [host], "kolla_backup.restore", [backup], timeout=3600, attempts=1).get(host)
    if not isinstance(said, list):   # the datadir is untouched, or half restored (its marker says so)
        return _fail(result, f"mariadb-restore on {host}: {_last_line(said)}; the members are stopped (one "
                             f"whose datadir is half restored refuses to start, naming the backup): `kolla-salt "
                             f"mariadb-recovery` starts the others as they are")
    result["said"] = said
    others = [h for h in members if h != host]
    result["cleared"] = ask(client, others, "kolla_galera.clear", timeout=300, attempts=1)
    for each, records in (manifest.get("jobs") or {}).items():
        if each in everyone:
            ask(client, [each], "kolla_backup.set_job_records", kwarg={"records": records})
    result["plan"] = {"bootstrap": host, "order": [host] + others}
    _start_in_order(client, host, result["plan"]["order"], result)
    result["seconds"] = round(time.monotonic() - started, 1)
    stopped = "; ".join(f"{each}: stopped {', '.join(names)}" for each, names in sorted(result["stopped"].items())
                        if isinstance(names, list) and names)
    result["note"] = (f"{stopped}; " if stopped else "") + "; ".join(f"{host}: {line}" for line in said) + (
        f"; the members hold backup {backup} ({result['seconds']} s); the deploy starts the writers again")
    return result


converge = _guarded(_converge)
recover = _guarded(_recover)
backup = _guarded(_backup)
restore = _guarded(_restore)
before_migrations = _guarded(_before_migrations)
