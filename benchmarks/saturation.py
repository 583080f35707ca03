#!/usr/bin/env python3
"""What the all-in-one cloud's front door serves (issue: the front door under load):
users ask keystone for tokens and list nova's servers, neutron's networks and
glance's images through haproxy on the VIP, each asking again as soon as it has its
answer (users are spread evenly over the APIs). The users double step by step, from
one per API, until the answers per second stop growing by 10%: the capacity, and the
users it takes. Then 1.5x and 2x those users: they queue in haproxy (latency grows);
the goal is 0 failed requests at 1.5x, and never a backend without a server up, at
any load.

With --changes, instead of the overload: changes that replace containers while the
same users ask at 70% of the capacity (each paced to its share of it), goal 0 failed
requests: a reconfigure of keystone (a keystone.conf override: its blue/green swap),
a reconfigure of nova (a nova.conf override: nova's API, conductor, scheduler and
console proxy), both overrides removed again (a reconfigure of the whole cloud), and the
upgrade of the whole cloud to the next release (`kolla-salt releases`), when the
cloud runs one that has a next.

Each step prints, per API: requests, failures, answers per second, p50 and p99
latency; and haproxy's view: how often its check marked a server down, and the
fewest servers a backend had up.

Usage: .venv/bin/python benchmarks/saturation.py [--help] [--config-dir DIR]
         [--step SECONDS] [--hold SECONDS] [--max-users N] [--changes]
Without --config-dir it deploys a throw-away all-in-one cloud of its own (its own
names and ports; images built where missing) and removes it afterwards."""
import argparse
import contextlib
import subprocess
import time
from pathlib import Path

import yaml

from cloud import throwaway_cloud
from common import KOLLA
from probes import BackendWatch, api_probes, capacity, load

from kolla_salt.declaration.releases import load_releases
from kolla_salt.declaration.roles import client_lists
from kolla_salt.declaration.settings import load_settings


@contextlib.contextmanager
def cloud(config_dir):
    """(operator folder, settings, admin password) of the cloud at config_dir, or of a throw-away one."""
    if config_dir:
        passwords = yaml.safe_load((Path(config_dir) / "passwords.yml").read_text())
        yield Path(config_dir), load_settings(config_dir), passwords["keystone_admin_password"]
        return
    with throwaway_cloud("kbench-load-") as env:
        print("[saturation] building what is missing, deploying a throw-away all-in-one cloud", flush=True)
        env.run("build")
        env.run("deploy")
        yield env.config_dir, load_settings(env.config_dir), env.passwords()["keystone_admin_password"]


@contextlib.contextmanager
def measured(probes, settings, users, label, every=0.01):
    """The load of `users` users (spread over the APIs, each asking every `every` s at
    most) while the block runs, printed under `label` with haproxy's view. Yields
    {name: figures} (probes.load), filled when the block ends."""
    watch = BackendWatch(settings["haproxy_runtime_directory"])
    watch.start()
    try:
        with load(probes, users, every) as figures:
            yield figures
    finally:
        watch.stop()
    total = sum(f["rate"] for f in figures.values())
    print(f"{label}: {total:6.1f} answers/s, "
          f"{sum(f['failed'] for f in figures.values())} of {sum(f['sent'] for f in figures.values())} failed, "
          f"servers marked down {sum(watch.marked_down.values())}, "
          f"fewest servers up {min(watch.fewest.values(), default=0)}"
          + "".join(f" ({name}: none up a moment)" for name, up in sorted(watch.fewest.items()) if up == 0), flush=True)
    for name, f in figures.items():
        print(f"      {name:10s} {f['users']:3d} users {f['sent']:5d} sent {f['failed']:4d} failed {f['rate']:6.1f}/s "
              f"p50 {f['p50']:.3f} s p99 {f['p99']:.3f} s{'  ' + str(f['failures'][:1]) if f['failures'] else ''}")


def step(probes, settings, users, seconds):
    """The load of `users` closed-loop users for `seconds`; the answers per second of all APIs together."""
    with measured(probes, settings, users, f"{users:3d} users") as figures:
        time.sleep(seconds)
    return sum(f["rate"] for f in figures.values())


def next_release(current):
    """The release after `current` that the whole cloud runs on (releases.yml `cloud`), or None."""
    names = list(load_releases())
    later = names[names.index(current) + 1:] if current in names else []
    return next((name for name in later if load_releases()[name].get("cloud")), None)


def changes(config_dir, upgrade_to):
    """[(what, kolla-salt arguments, [(override file, text to write or None to remove it)])];
    the last one upgrades to `upgrade_to` unless it is None."""
    keystone = Path(config_dir) / "config" / "keystone" / "keystone.conf"
    nova = Path(config_dir) / "config" / "nova" / "nova.conf"
    steps = [("keystone's swap (a keystone.conf override)", ["reconfigure", "--services", "keystone"],
              [(keystone, "[DEFAULT]\nmax_param_size = 65\n")]),
             ("nova's containers (a nova.conf override)", ["reconfigure", "--services", "nova"],
              [(nova, "[api]\nmax_limit = 999\n")]),
             ("the whole cloud (both overrides removed)", ["reconfigure"], [(keystone, None), (nova, None)])]
    if upgrade_to:
        steps.append((f"the whole cloud upgraded to {upgrade_to}", ["upgrade", "--release", upgrade_to], []))
    return steps


def run_changes(config_dir, settings, probes, users, every):
    upgrade_to = next_release(settings["openstack_release"])
    if upgrade_to:
        print(f"[saturation] building {upgrade_to}'s images where missing", flush=True)
        kolla(config_dir, "build", "--release", upgrade_to)
    for what, args, overrides in changes(config_dir, upgrade_to):
        for path, text in overrides:
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        print(f"[saturation] {what}: kolla-salt {' '.join(args)}", flush=True)
        began = time.monotonic()
        with measured(probes, settings, users, f"during {what}", every):
            kolla(config_dir, *args)
        print(f"      took {time.monotonic() - began:.0f} s", flush=True)


def kolla(config_dir, *args):
    """Runs kolla-salt ARGS on the cloud at config_dir; the end of the benchmark when it fails."""
    proc = subprocess.run([KOLLA, "--config-dir", str(config_dir), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"kolla-salt {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-dir", help="the operator folder of a deployed cloud to load (default: a throw-away one)")
    parser.add_argument("--step", type=float, default=15, help="seconds per step of the ramp")
    parser.add_argument("--hold", type=float, default=60, help="seconds at 1.5x and at 2x the capacity's users")
    parser.add_argument("--max-users", type=int, default=64, help="users at most")
    parser.add_argument("--changes", action="store_true",
                        help="after the capacity: reconfigures and the release upgrade at 70%% of it, not the overload")
    args = parser.parse_args()
    if args.step <= 0 or args.hold <= 0 or args.max_users < 1:
        parser.error("--step and --hold must be positive, --max-users at least 1")
    with cloud(args.config_dir) as (config_dir, settings, password):
        vip, port = settings["kolla_internal_vip_address"], settings["keystone_public_port"]
        probes = api_probes(port, password, vip, client_lists(settings))
        print(f"[saturation] {', '.join(probes)} through {vip}, {args.step:.0f} s a step", flush=True)
        best, capacity_users = capacity(lambda users: step(probes, settings, users, args.step), len(probes),
                                        args.max_users)
        print(f"capacity: {best:.1f} answers/s with {capacity_users} users")
        if args.changes:
            # the capacity's users, each paced to its share of 70% of the capacity
            every = capacity_users / (0.7 * best)
            print(f"[saturation] {capacity_users} users asking every {every:.2f} s: {0.7 * best:.1f} answers/s")
            run_changes(config_dir, settings, probes, capacity_users, every)
            return
        for factor in (1.5, 2):
            users = round(capacity_users * factor)
            print(f"[saturation] {factor}x the capacity's users for {args.hold:.0f} s", flush=True)
            step(probes, settings, users, args.hold)


if __name__ == "__main__":
    main()
