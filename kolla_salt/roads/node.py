"""Makes this machine (or a lab host's namespaces) a salt-master or a salt-minion of
kolla-salt: writes the daemon's config under --root and becomes the daemon.

    python -m kolla_salt.roads.node master --id master --address 198.18.0.1 --root DIR --operator-folder DIR
    python -m kolla_salt.roads.node minion --id host1 --master 198.18.0.1 --root DIR [--grain key=value ...]

The one provisioning step shared by the lab (kolla_salt.lab.namespaces, hosts in namespaces)
and the Vagrantfile (VMs): both run scripts/provision-node.sh, which runs this.
A master serves this checkout's states and modules, builds each minion's pillar
from the operator folder (pillar/kolla.sls) and restarts what a minion's health
beacon reports (salt/reactor/kolla_health/master.sls).
"""
import argparse
import os
from pathlib import Path

import yaml

from .. import paths
from .master import GATHER_JOB_SECONDS, SALT_BIN


# The daemons run below the services' priority. Their work comes in bursts (a pillar
# per minion, rendering states, comparing containers: at the end of an upgrade in
# the lab, seconds of more work than the machine has cores) that would otherwise
# take the CPU from the services users reach on the same host, and requests waiting
# behind them failed. What they start keeps the normal priority: containers are
# the engine's children, not theirs.
DAEMON_NICENESS = 10


def served_from_checkout(operator_folder):
    """What a master serves from this checkout: its states, its pillar over the operator's
    folder, and its runners (kolla_galera, kolla_rollout: loaded by every salt-run,
    nothing to sync)."""
    return {
        "file_roots": {"base": [str(paths.STATES_DIR), str(paths.REPO / "salt")]},
        "pillar_roots": {"base": [str(paths.PILLAR_DIR)]}, "kolla_config_dir": str(operator_folder),
        "runner_dirs": [str(paths.REPO / "salt" / "_runners")],
    }


def master_config(root, master_id, address, operator_folder):
    return {
        "id": master_id, "interface": address, "root_dir": str(root), "user": "root",
        "sock_dir": str(root / "sock"), "pidfile": str(root / "salt-master.pid"),
        "log_file": str(root / "salt-master.log"), "log_level_logfile": "warning",
        **served_from_checkout(operator_folder),
        # How long the master waits, once a job's time is up, for a minion to say it
        # still runs it (saltutil.find_job) or for its return: with Salt's 10 s, a host
        # running several sets' state runs side by side on a loaded machine lost the
        # return of one that had ended ("Minion host1 did not return a state result").
        # A minion that is down is named this much later.
        "gather_job_timeout": GATHER_JOB_SECONDS,
        # A blue/green swap on one host drains its server in every host's haproxy.
        "peer": {".*": ["kolla_balancer\\..*"]},
        # The health loop: each host's beacon (from its pillar) reports, the master restarts there.
        "reactor": [{"salt/beacon/*/kolla_health/*/unhealthy": [
            str(paths.REPO / "salt" / "reactor" / "kolla_health" / "master.sls")]}],
        # Scheduled database backups: the runner reads globals.yml each minute
        # (mariadb_backup_interval_minutes; 0, the default: nothing), so a change
        # needs no restart of the master.
        "schedule": {"kolla-mariadb-backup": {"function": "kolla_galera.scheduled", "seconds": 60,
                                              "maxrunning": 1}},
    }


def minion_config(root, minion_id, master, grains):
    return {
        "id": minion_id, "master": master, "root_dir": str(root),
        "sock_dir": str(root / "sock"), "pidfile": str(root / "salt-minion.pid"),
        "log_file": str(root / "salt-minion.log"), "log_level_logfile": "warning",
        "acceptance_wait_time": 1, "grains": grains,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kolla_salt.roads.node", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("master", "minion"))
    parser.add_argument("--id", required=True, help="the minion id (a host's name)")
    parser.add_argument("--root", required=True, type=Path, help="the daemon's folder: config, keys, cache, log")
    parser.add_argument("--address", help="master: the address it listens on")
    parser.add_argument("--operator-folder", type=Path, help="master: globals.yml and passwords.yml (its pillar)")
    parser.add_argument("--master", help="minion: the master's address")
    parser.add_argument("--grain", action="append", default=[], metavar="KEY=VALUE", help="minion: a static grain")
    args = parser.parse_args(argv)
    if args.role == "master" and not (args.address and args.operator_folder):
        parser.error("master needs --address and --operator-folder")
    if args.role == "minion" and not args.master:
        parser.error("minion needs --master")
    args.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = (master_config(args.root, args.id, args.address, args.operator_folder) if args.role == "master" else
              minion_config(args.root, args.id, args.master, dict(g.split("=", 1) for g in args.grain)))
    (args.root / args.role).write_text(yaml.safe_dump(config))
    daemon = str(SALT_BIN / f"salt-{args.role}")
    os.nice(DAEMON_NICENESS)
    os.execv(daemon, [daemon, "-c", str(args.root), "-l", "quiet"])


if __name__ == "__main__":
    main()
