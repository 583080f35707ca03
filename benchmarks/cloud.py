#!/usr/bin/env python3
"""The all-in-one cloud's figures (issue: a cloud you can boot a server in): its
deploy from built images (every service of the all-in-one globals: keystone,
glance, placement, nova with libvirt, neutron with OVN and Open vSwitch, horizon),
its memory at rest against the 8 GiB goal, and a server of the project's guest
from `server create` to ACTIVE and to its boot message in the console log.

Usage: .venv/bin/python benchmarks/cloud.py [--help] [--rest SECONDS]
(images are built first where missing: `kolla-salt build` and the guest)"""
import argparse
import contextlib
import subprocess
import time
from pathlib import Path

import docker
import yaml

from common import BenchEnv
from guest import boot_server, console_log, remove_guest, wait_for


REPO = Path(__file__).resolve().parent.parent
BRIDGE = "kbench-br"   # the integration bridge: a device on this host, the benchmark's own name
GOAL = 8 << 30


def cloud_settings():
    """The enable_ keys of the all-in-one globals `make deploy` starts from."""
    aio = yaml.safe_load((REPO / "pillar/examples/globals-aio.yml").read_text())
    return {key: value for key, value in aio.items() if key.startswith("enable_")}


@contextlib.contextmanager
def throwaway_cloud(prefix, **changes):
    """A BenchEnv of the whole all-in-one cloud with its own names (deployed by the
    caller), removed afterwards with what it made on the host: behind haproxy, as
    `make deploy` puts it."""
    env = BenchEnv(prefix, **{**cloud_settings(), "enable_haproxy": True, "enable_health_loop": False,
                              "ovs_integration_bridge": BRIDGE, **changes})
    try:
        yield env
    finally:
        for vswitchd in docker.from_env().containers.list(filters={"name": env.prefix + "openvswitch_vswitchd"}):
            vswitchd.exec_run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE])   # its datapath goes with its last bridge
        env.close()
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)   # the userspace datapath's


def memory_in_use(client, prefix):
    """{container: bytes} as `docker stats` counts them (usage without the page cache
    the kernel can drop), for this cloud's containers."""
    used = {}
    for container in client.containers.list(filters={"name": prefix}):
        stats = container.stats(stream=False)["memory_stats"]
        used[container.name.removeprefix(prefix)] = stats["usage"] - stats.get("stats", {}).get("inactive_file", 0)
    return used


def qemu_memory(instance):
    """Resident memory of a guest's qemu (the host's process: libvirt's cgroup, not a container's)."""
    pid = subprocess.run(["pgrep", "-f", f"guest={instance},"], capture_output=True, text=True).stdout.split()
    status = Path(f"/proc/{pid[0]}/status").read_text() if pid else ""
    return next((int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rest", type=float, default=60, help="seconds the cloud rests before its memory is read")
    args = parser.parse_args()
    client = docker.from_env()
    with throwaway_cloud("kbench-cloud-") as env:
        try:
            print("[cloud] building what is missing (the enabled services' images, the guest)", flush=True)
            env.run("build")
            env.run("build", "guest")
            print("[cloud] deploying", flush=True)
            deployed = env.timed("deploy")
            names = sorted(memory_in_use(client, env.prefix))
            print(f"deploy of the whole all-in-one cloud from built images ({len(names)} containers): {deployed:.1f} s")
            time.sleep(args.rest)
            used = memory_in_use(client, env.prefix)
            total = sum(used.values())
            for name, size in sorted(used.items(), key=lambda item: -item[1])[:8]:
                print(f"  {name}: {size / 2**20:.0f} MiB")
            print(f"memory at rest after {args.rest:.0f} s: {total / 2**20:.0f} MiB in {len(used)} containers, "
                  f"{total / GOAL:.0%} of the 8 GiB goal")

            env.run("init-runonce", "--prefix", "kbench-", "--cidr", "198.18.21.0/24")
            started = time.monotonic()
            server = boot_server(env.openstack, "kbench-")
            active = time.monotonic() - started
            wait_for("boot message", lambda: "kolla-salt guest: booted" in console_log(env.openstack, server["id"]), 180)
            booted = time.monotonic() - started
            guest = qemu_memory(server["OS-EXT-SRV-ATTR:instance_name"])
            virtualization = next(line for line in env.run("validate").splitlines() if line.startswith("guests run with"))
            print(f"server ({virtualization}): ACTIVE "
                  f"{active:.1f} s after `server create`, boot message in its console log after {booted:.1f} s")
            print(f"with the server running: {(sum(memory_in_use(client, env.prefix).values()) + guest) / 2**20:.0f} MiB "
                  f"(its qemu {guest / 2**20:.0f} MiB)")
        finally:
            remove_guest(env.openstack, "kbench-")


if __name__ == "__main__":
    main()
