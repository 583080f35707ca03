#!/usr/bin/env python3
"""What the all-in-one cloud's front door serves (issue: the front door under load):
users ask keystone for tokens and list nova's servers, neutron's networks and
glance's images through haproxy on the VIP, each asking again as soon as it has its
answer (users are spread evenly over the APIs). The users double step by step, from
one per API, until the answers per second stop growing by 10%: the capacity, and the
users it takes. Then 1.5x and 2x those users: they queue in haproxy (latency grows);
the goal is 0 failed requests at 1.5x, and never a backend without a server up, at
any load.

Each step prints, per API: requests, failures, answers per second, p50 and p99
latency; and haproxy's view: how often its check marked a server down, and the
fewest servers a backend had up.

Usage: .venv/bin/python benchmarks/saturation.py [--help] [--config-dir DIR]
         [--step SECONDS] [--hold SECONDS] [--max-users N]
Without --config-dir it deploys a throw-away all-in-one cloud of its own (its own
names and ports; images built where missing) and removes it afterwards."""
import argparse
import contextlib
from pathlib import Path

import yaml

from cloud import throwaway_cloud
from probes import BackendWatch, api_probes, capacity, run_load

from kolla_salt.inventory import load_settings


@contextlib.contextmanager
def cloud(config_dir):
    """(settings, admin password) of the cloud at config_dir, or of a throw-away one."""
    if config_dir:
        passwords = yaml.safe_load((Path(config_dir) / "passwords.yml").read_text())
        yield load_settings(config_dir), passwords["keystone_admin_password"]
        return
    with throwaway_cloud("kbench-load-") as env:
        print("[saturation] building what is missing, deploying a throw-away all-in-one cloud", flush=True)
        env.run("build")
        env.run("deploy")
        yield load_settings(env.config_dir), env.passwords()["keystone_admin_password"]


def step(probes, settings, users, seconds):
    """The load of `users` users (spread over the APIs) for `seconds`, printed with
    haproxy's view; the answers per second of all APIs together."""
    watch = BackendWatch(settings["haproxy_runtime_directory"])
    watch.start()
    try:
        figures = run_load(probes, users, seconds)
    finally:
        watch.stop()
    total = sum(f["rate"] for f in figures.values())
    print(f"{users:3d} users: {total:6.1f} answers/s, "
          f"{sum(f['failed'] for f in figures.values())} of {sum(f['sent'] for f in figures.values())} failed, "
          f"servers marked down {sum(watch.marked_down.values())}, "
          f"fewest servers up {min(watch.fewest.values(), default=0)}", flush=True)
    for name, f in figures.items():
        print(f"      {name:10s} {f['users']:3d} users {f['sent']:5d} sent {f['failed']:4d} failed {f['rate']:6.1f}/s "
              f"p50 {f['p50']:.3f} s p99 {f['p99']:.3f} s{'  ' + str(f['failures'][:1]) if f['failures'] else ''}")
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-dir", help="the operator folder of a deployed cloud to load (default: a throw-away one)")
    parser.add_argument("--step", type=float, default=15, help="seconds per step of the ramp")
    parser.add_argument("--hold", type=float, default=60, help="seconds at 1.5x and at 2x the capacity's users")
    parser.add_argument("--max-users", type=int, default=64, help="users at most")
    args = parser.parse_args()
    with cloud(args.config_dir) as (settings, password):
        vip, port = settings["kolla_internal_vip_address"], settings["keystone_public_port"]
        probes = api_probes(port, password, vip)
        print(f"[saturation] {', '.join(probes)} through {vip}, {args.step:.0f} s a step", flush=True)
        best, capacity_users = capacity(lambda users: step(probes, settings, users, args.step), len(probes),
                                        args.max_users)
        print(f"capacity: {best:.1f} answers/s with {capacity_users} users")
        for factor in (1.5, 2):
            users = round(capacity_users * factor)
            print(f"[saturation] {factor}x the capacity's users for {args.hold:.0f} s", flush=True)
            step(probes, settings, users, args.hold)


if __name__ == "__main__":
    main()
