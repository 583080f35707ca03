#!/usr/bin/env python3
"""A release upgrade of the whole all-in-one cloud taken back with its data
(`kolla-salt rollback --release`), as an operator whose new release misbehaves would.

The whole cloud at --release with a server running; `upgrade --release NEXT` (it
backs the database up before its migrations); a project and a flavor made on NEXT;
then `rollback --release RELEASE --yes-i-really-mean-it`. Printed: the backup's time
and size, the upgrade's and the rollback's durations, and what a user finds after
it: every container at RELEASE, the rows made on NEXT gone, the rows from before
there, the first server running (its qemu kept its PID) and a new server booting.
Usage: .venv/bin/python benchmarks/release_rollback.py [--help] [--release 2026.1] [--next 2026.2]
(both releases' images must be built: `kolla-salt build --all` and `build --release NEXT`)"""
import argparse
import json
import subprocess
import time

import docker

from cloud import throwaway_cloud
from guest import boot_server, console_log, remove_guest, wait_for


def qemu_pid(instance):
    found = subprocess.run(["pgrep", "-f", f"guest={instance},"], capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", default="2026.1")
    parser.add_argument("--next", default="2026.2")
    args = parser.parse_args()
    client = docker.from_env()
    with throwaway_cloud("kbrb-", openstack_release=args.release, kolla_install_type="source") as env:
        try:
            print(f"[release-rollback] deploying the whole cloud at {args.release}", flush=True)
            env.run("deploy")
            env.run("init-runonce", "--prefix", "kbrb-", "--cidr", "198.18.22.0/24")
            first = boot_server(env.openstack, "kbrb-", name="before")
            qemu = qemu_pid(first["OS-EXT-SRV-ATTR:instance_name"])
            env.openstack("project", "create", "--domain", "default", "kbrb-before")

            upgraded = env.timed("upgrade", "--release", args.next)
            backups = env.run("mariadb-backup", "--list").splitlines()
            print(f"upgrade to {args.next}: {upgraded:.0f} s; the backup before its migrations: {backups[-1]}")
            env.openstack("project", "create", "--domain", "default", "kbrb-after")
            env.openstack("flavor", "create", "--ram", "64", "--disk", "1", "kbrb-after", values=False)

            rolled = env.timed("rollback", "--release", args.release, "--yes-i-really-mean-it")
            releases = {c.name: c.image.labels.get("kolla.release") for c in client.containers.list(
                filters={"name": env.prefix}) if c.image.labels.get("kolla.release")}
            projects = env.openstack("project", "list", "-c", "Name").split()
            flavors = env.openstack("flavor", "list", "-c", "Name").split()
            state = env.openstack("server", "show", first["id"], "-c", "status").strip()
            print(f"rollback to {args.release}: {rolled:.0f} s; containers on {sorted(set(releases.values()))}; "
                  f"made before the upgrade: {'there' if 'kbrb-before' in projects else 'LOST'}; made on "
                  f"{args.next}: {'gone' if 'kbrb-after' not in projects + flavors else 'STILL THERE'}; the first "
                  f"server {state}, its qemu {'kept its PID' if qemu_pid(first['OS-EXT-SRV-ATTR:instance_name']) == qemu else 'CHANGED'}")
            started = time.monotonic()
            second = boot_server(env.openstack, "kbrb-", name="after")
            wait_for("boot message", lambda: "kolla-salt guest: booted" in console_log(env.openstack, second["id"]), 180)
            print(f"a server booted on {args.release} after the rollback: {second['status']}, boot message "
                  f"{time.monotonic() - started:.0f} s after `server create`")
            print(json.dumps({"upgrade_s": round(upgraded), "rollback_s": round(rolled)}))
        finally:
            remove_guest(env.openstack, "kbrb-")


if __name__ == "__main__":
    main()
