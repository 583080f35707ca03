"""The database: backups, restores, Galera recovery, and the release rollback that
puts the database back with the containers."""
import json
import time

from ..declaration.tree import all_services
from ..errors import KollaError, ValidationError
from ..roads.statereturns import on_host, summarise
from .common import _confirmed, _host_name, _one_host, _refusal_of, _release, _settings
from .converge import _converge
from .declaring import _declaring


def cmd_mariadb_recovery(args):
    """Brings a Galera cluster back after every member stopped: finds the member with
    the highest committed position, bootstraps from it, rejoins the others one at a
    time (salt/_runners/kolla_galera.py)."""
    members, ok, result = args.road.galera_recovery()
    result = result if isinstance(result, dict) else {"error": str(result)}
    for host, found in sorted((result.get("positions") or {}).items()):
        print(f"[mariadb-recovery] {host}: " + (f"seqno {found['seqno']} of cluster {found['uuid']}"
                                                if found.get("data") else "no data"))
    if result.get("plan"):
        print(f"[mariadb-recovery] bootstrapping from {result['plan']['bootstrap']}, then "
              f"{', '.join(result['plan']['order'][1:])} one at a time")
    failed = 0
    for host, states in sorted((result.get("ret") or {}).items()):
        failed += summarise(states, out=lambda line, host=host: print(f"{host}: {line}"))[1]
    if result.get("error") or not ok:
        print(f"[mariadb-recovery] FAILED: {result.get('error') or 'salt-run kolla_galera.recover failed'}")
        return 1
    print(f"[mariadb-recovery] the cluster is back: {len(members)} members Synced in {result.get('seconds')} s")
    return 0 if failed == 0 else 1


def cmd_mariadb_backup(args):
    """A backup of the database (kolla_salt.operations.backup), or the list of those kept."""
    from ..operations.backup import backup_directory
    if args.list and args.incremental:
        raise ValidationError(["--list, --incremental: one or the other"])
    if args.list:
        directory = backup_directory(_settings(args))
        for host, found in _backups_listed(args, args.road.database_members()[0]).items():
            print(f"backups in {directory}{f' on {host}' if host else ''}: {len(found)}")
            for manifest in found:
                kind = f"incremental of {manifest['base']}" if manifest["kind"] == "incremental" else "full"
                print(f"{manifest['name']}\t{kind}\t{manifest['archive']['bytes'] >> 20} MiB\t"
                      f"{manifest['seconds']} s\t{', '.join(sorted(set(manifest['releases'].values()))) or '-'}\t"
                      f"{manifest['why']}")
        return 0
    # Master.backup: the last Synced member copied by the runner kolla_galera; Here.backup:
    # this host's, through salt-call.
    manifest = args.road.backup("asked (kolla-salt mariadb-backup)", args.incremental,
                                args.road.database_members()[1])
    print(f"[mariadb-backup] {manifest['name']}: restore with `kolla-salt mariadb-restore {manifest['name']}`")
    return 0


def _backups_listed(args, members):
    """{host: the manifests of its backups} of the database's hosts `members` ([None]:
    this host) (kolla_backup.list)."""
    found = args.road.returns(members, "kolla_backup.list", timeout=60)
    silent = [h for h in members if not isinstance(found.get(h), list)]
    if silent:
        raise KollaError("mariadb-backup: " + ", ".join(map(_host_name, silent))
                         + " did not list their backups ("
                         + "; ".join(_refusal_of(found.get(h)).splitlines()[-1] for h in silent) + ")")
    return {h: found[h] for h in members}


def _restore_checked(args, members, host, name, releases):
    """The manifest of backup `name` of `host` (None: this host) once its files check
    out there (kolla_backup.find), it fits containers at `releases` and the operator
    folder's secrets, and the operator agreed, told what the restore forgets while it
    lives on (kolla_backup.forgotten); ValidationError naming the problems, or None if
    not agreed. `members`: the database's hosts."""
    from ..operations.backup import release_problems, secret_problems
    manifest = _one_host(args, host, "kolla_backup.find", json.dumps(name))
    if not isinstance(manifest, dict):
        raise ValidationError([f"{on_host(host)}{_refusal_of(manifest)}"])
    problems = release_problems(manifest, releases) + secret_problems(manifest, args.config_dir,
                                                                      args.road.secrets_folder(name))
    if problems:
        raise ValidationError(problems)
    whose = f"every member ({', '.join(members)})" if host else "this host"
    print(f"This puts back the database of {whose} as "
          f"backup {name}{f' of {host}' if host else ''} holds it ({manifest['taken']}, {manifest['why']}): "
          f"everything written since is lost, though a backup of the data it replaces is taken first. The services "
          f"that write to it are stopped meanwhile"
          + ("; the other members are emptied and copy the restored one." if len(members) > 1 else "."))
    found = _one_host(args, host, "kolla_backup.forgotten", json.dumps(name))
    if not isinstance(found, dict):
        raise KollaError(f"{on_host(host)}{_refusal_of(found)}")
    for what, (why, each) in found.items():
        print(f"  {what} {why}: {', '.join(each)}")
    return manifest if _confirmed(args) else None


def _restore_and_deploy(args, command, facts, plan, hosts=None, allow_jump=None):
    """The restore of `plan` ({host, backup, first}: backup `backup` of `host`, the
    services `first` names stopped before the writers) and the deploy that starts the
    writers again, as one run: a master's orchestration (kolla.restore,
    kolla.rollback_release: `command`), one host's deploy (kolla_backup.restored). A
    backup of what it replaces is taken first. Every host of `hosts` (the declaration,
    Road.redeclared) deploys; `allow_jump`: why a release change outside the upgrade
    paths is allowed (a release rollback's), said."""
    args.services, args.test, args.allow_release_jump = None, False, allow_jump
    pillar = {"kolla_restore": plan, "kolla_command": f"kolla-salt {args.command}"}
    return _converge(args, command, facts, args.road.redeclared(facts, hosts, allow_jump) or {}, [], pillar)


def cmd_mariadb_restore(args):
    """Puts the database back as backup NAME holds it: checks first, takes a backup of
    what it replaces, stops the services that write to the database, restores the
    datadir, starts them again (docs/operations.md: "Database backups"); through a
    master the cluster is founded again from the member holding it."""
    from ..operations.backup import host_releases
    facts = args.road.preflight(declared=True)   # the deploy after the restore through a master reads it
    members, _ = args.road.database_members(facts)
    kept = _backups_listed(args, members)
    # One host's kolla_backup.find says why a backup it does not list is not whole.
    host = next((h for h in members if any(m["name"] == args.backup for m in kept[h])),
                members[0] if len(members) == 1 else False)
    if host is False:
        raise ValidationError([f"{args.backup}: no such backup on {', '.join(map(_host_name, members))} (backups: "
                               + "; ".join(f"{on_host(h)}{', '.join(m['name'] for m in kept[h]) or 'none'}"
                                           for h in members) + ")"])
    if _restore_checked(args, members, host, args.backup, host_releases(facts)) is None:
        return 1
    started = time.monotonic()
    code = _restore_and_deploy(args, "restore", facts, {"host": host, "backup": args.backup, "first": []})
    print(f"[{args.command}] {'the database holds' if code == 0 else 'FAILED to bring back the services on'} backup "
          f"{args.backup} ({time.monotonic() - started:.0f} s)")
    return code


def _rollback_release(args):
    """rollback --release OLD, after an upgrade from OLD: the database as the newest
    backup taken under OLD holds it (the upgrade took one before its migrations), then
    every container at OLD (kolla_salt.operations.backup.rollback_plan); through a
    master the Galera cluster is founded again from the member holding that backup,
    and every host deploys (kolla.rollback_release). Declared first
    (openstack_release): killed half way, the same command completes it."""
    from ..operations.backup import host_releases, rollback_plan
    _release(args.release)
    facts = args.road.preflight()
    members, _ = args.road.database_members(facts)
    running = host_releases(facts)
    plan = rollback_plan(_backups_listed(args, members), running, args.release,
                         all_services(args.road.declared(facts)), _settings(args)["container_name_prefix"])
    if _restore_checked(args, members, plan["host"], plan["backup"], dict.fromkeys(running, args.release)) is None:
        return 1
    started = time.monotonic()
    hosts = {}

    def check():
        """The whole declaration validates before the database goes back: every host's
        pillar, kept for what stops first; the images of the release gone back to must
        be where the hosts take them from."""
        hosts.update(args.road.declaration(facts))
        args.road.check_images(hosts)
    with _declaring(args, check) as (user_globals, pins):
        user_globals["openstack_release"] = args.release
        pins.forget_releases()
        pins.containers.clear()
    if plan["first"]:
        print(f"[rollback] {', '.join(reversed(plan['first']))} stop first, then the services that write to the "
              f"database (the reverse of the upgrade's order); they start again at {args.release} once the database "
              f"is back", flush=True)
    code = _restore_and_deploy(args, "rollback_release", facts, plan, hosts,
                               allow_jump=f"the database went back to backup {plan['backup']}")
    where = f" of {plan['host']}" if plan["host"] else ""
    print(f"[rollback] {'the cloud runs' if code == 0 else 'FAILED to bring back'} {args.release} with the database "
          f"of backup {plan['backup']}{where} ({time.monotonic() - started:.0f} s)")
    return code
