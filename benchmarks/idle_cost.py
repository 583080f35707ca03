#!/usr/bin/env python3
"""What the machinery costs at rest (goals: at most 0.1 core; a no-op converge in
at most 2 s).

With the all-in-one cloud idle (no client), it reads /proc/stat over --seconds
(60) twice: with the health loop running and with it stopped (started again
afterwards). Each time it also sums the CPU time of the machinery's own
processes (from /proc/<pid>/stat):
  docker      dockerd and containerd, which serve the loop's API calls
  checks      the containerd shims and what they reaped: the check processes
              that Docker's HEALTHCHECK and the loop's `docker exec` run in the
              containers (a check's own CPU, not the API work it causes)
  loop        the health daemon (salt-minion, its beacon, its reactor) and its children
Then it times a no-op `kolla-salt deploy` (--rounds, nothing to change) and
where its time goes, from the moments its output lines appear.

It also sums the memory the cloud's containers use at rest (as `docker stats` counts it).

Usage: .venv/bin/python benchmarks/idle_cost.py [--help] [--config-dir DIR] [--base VERSION] [--seconds N] [--rounds N]
Without --config-dir it deploys a throw-away all-in-one cloud of its own, on the
images of --base (kolla_base_distro_version: bookworm or trixie; default the release's).
"""
import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import docker
from cloud import memory_in_use, throwaway_cloud
from common import noop_deploy

from kolla_salt.declaration.settings import load_settings
from kolla_salt.healing import healthloop
from kolla_salt.healing.hostsignals import process_table

GOAL_CORES, GOAL_CONVERGE = 0.1, 2.0
TICKS = os.sysconf("SC_CLK_TCK")


def host_busy():
    """(busy, total) jiffies of all CPUs since boot (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]          # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_ticks(pid):
    """utime + stime + cutime + cstime of `pid` (its reaped children's too), or 0."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return 0
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(v) for v in fields[11:15])


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def machinery(settings):
    """{group: [pid]} of the machinery's processes now."""
    table = process_table()
    groups = {"docker": [], "checks": [], "loop": []}
    for pid in table:
        name = command_name(pid)
        if name in ("dockerd", "containerd"):
            groups["docker"].append(pid)
        elif name.startswith("containerd-shim"):
            groups["checks"].append(pid)
    daemon = healthloop.running_pid(settings)
    if daemon:
        children = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        todo = [daemon]
        while todo:
            pid = todo.pop()
            groups["loop"].append(pid)
            todo.extend(children.get(pid, []))
    return groups


def measure(settings, seconds):
    """Cores the host kept busy over `seconds`, and {group: cores} of the machinery."""
    groups = machinery(settings)
    before = {pid: process_ticks(pid) for pids in groups.values() for pid in pids}
    busy0, total0 = host_busy()
    time.sleep(seconds)
    busy1, total1 = host_busy()
    cores = os.cpu_count() * (busy1 - busy0) / (total1 - total0)
    # Processes that ended meanwhile (a reaction's) are lost: their time is in no parent we follow.
    used = {group: sum(max(process_ticks(pid) - before[pid], 0) for pid in pids) / TICKS / seconds
            for group, pids in groups.items()}
    return cores, used


@contextlib.contextmanager
def cloud(config_dir, base):
    if config_dir:
        yield Path(config_dir)
        return
    with throwaway_cloud("kbench-idle-", enable_health_loop=True, kolla_base_distro_version=base) as env:
        print("deploying a throw-away all-in-one cloud...", flush=True)
        env.run("deploy")
        yield env.config_dir


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-dir", help="the operator folder of a deployed cloud (default: a throw-away one)")
    parser.add_argument("--base", default="", help="the throw-away cloud's images' base (kolla_base_distro_version; "
                                                   "default: the release's)")
    parser.add_argument("--seconds", type=int, default=60, help="length of each CPU reading (default 60)")
    parser.add_argument("--rounds", type=int, default=5, help="no-op deploys to time (default 5)")
    args = parser.parse_args()
    if args.seconds < 5 or args.rounds < 1:
        parser.error("--seconds must be at least 5, --rounds at least 1")
    with cloud(args.config_dir, args.base) as config_dir:
        settings = load_settings(config_dir)
        if not healthloop.running_pid(settings):
            raise SystemExit(f"{config_dir}: its health loop does not run (enable_health_loop, `kolla-salt deploy`)")
        print(f"settling 20 s, then {args.seconds} s with the loop and {args.seconds} s without", flush=True)
        time.sleep(20)
        with_loop = measure(settings, args.seconds)
        healthloop.stop_health_daemon(settings)
        try:
            time.sleep(5)
            without = measure(settings, args.seconds)
        finally:
            healthloop.ensure_health_daemon(settings)
        print(f"\nidle cloud ({os.cpu_count()} cores), Docker checks every {settings['health_docker_interval']} s, "
              f"the loop's every {settings['health_check_interval']} s")
        for label, (cores, used) in (("with the loop", with_loop), ("without it", without)):
            parts = ", ".join(f"{group} {value:.3f}" for group, value in used.items())
            print(f"  {label:14s} host busy {cores:.3f} cores; machinery {sum(used.values()):.3f} ({parts})")
        memory = memory_in_use(docker.from_env(), settings["container_name_prefix"])
        print(f"  memory of its {len(memory)} containers at rest ({settings['kolla_base_distro']}-"
              f"{settings['kolla_base_distro_version']} images): {sum(memory.values()) / 2**20:.0f} MiB")
        machinery_cores = sum(with_loop[1].values())
        print(f"  the loop's cost (host busy with - without): {with_loop[0] - without[0]:.3f} cores")
        print(f"  machinery at rest: {machinery_cores:.3f} cores, goal {GOAL_CORES}: "
              f"{machinery_cores / GOAL_CORES:.2f}x the goal")
        time.sleep(10)   # the loop started again and saw every container
        # "[deploy] deploying ..." once the CLI read the settings and the host's
        # addresses, "[deploy] N states: ..." once salt-call's run is over (the
        # pillar, the checks of its first states, the services' states).
        runs = [noop_deploy(["--config-dir", str(config_dir)], [("settings", "[deploy] deploying"),
                                                                ("salt-call state.apply", " states: ")],
                            "client files, health loop") for _ in range(args.rounds)]
        totals = [total for total, _ in runs]
        print(f"\nno-op deploy: median {statistics.median(totals):.2f} s (min {min(totals):.2f}, "
              f"max {max(totals):.2f}), goal {GOAL_CONVERGE} s: {statistics.median(totals) / GOAL_CONVERGE:.2f}x the goal")
        fastest = min(runs)[1]
        print("  where the time goes (fastest run): " + ", ".join(f"{label} {s:.2f} s" for label, s in fastest))


if __name__ == "__main__":
    sys.exit(main())
