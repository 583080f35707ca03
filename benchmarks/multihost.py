#!/usr/bin/env python3
"""Many hosts through one salt-master, on a lab of 3 hosts on this machine (its own
name, kbench; removed at the end): `lab up` time, pushing the images to its registry,
a deploy from built images (keystone and its infrastructure on host1, memcached on
every host; the hosts pull), a no-op converge through the master (goal <= 10 s),
and an upgrade orchestration of memcached host by host (batch 1), per host.
Usage: .venv/bin/python benchmarks/multihost.py [--help] [--hosts N]"""
import sys
from pathlib import Path

import yaml

from common import timed

LAB = "kbench"


def main():
    if "--help" in sys.argv:
        print(__doc__)
        return
    hosts = int(sys.argv[sys.argv.index("--hosts") + 1]) if "--hosts" in sys.argv else 3
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kolla_salt.declaration.roles import placement, service_images
    from kolla_salt.declaration.settings import load_settings
    from kolla_salt.lab.namespaces import Lab
    lab = ["lab", "--name", LAB, "--hosts", str(hosts)]
    try:
        up = timed(*lab[:1], "up", *lab[1:])
        folder = Path(Lab(LAB, hosts).config_dir())
        settings = yaml.safe_load((folder / "globals.yml").read_text())
        settings["roles"] = {"control": ["host1"], "compute": [f"host{i}" for i in range(2, hosts + 1)],
                             "memcached": ["*"]}
        (folder / "globals.yml").write_text(yaml.safe_dump(settings))
        images = service_images(load_settings(folder))
        push = timed("--lab", LAB, "build", "--push")
        deploy = timed("--lab", LAB, "deploy")
        noops = [timed("--lab", LAB, "deploy") for _ in range(3)]
        settings["memcached_memory_mb"] = 48
        (folder / "globals.yml").write_text(yaml.safe_dump(settings))
        upgrade = timed("--lab", LAB, "upgrade", "--services", "memcached", "--batch", "1")
        services = ", ".join(f"{step['service']} on {' or '.join(step['hosts'])}" for step in placement(folder))
        print(f"lab of {hosts} hosts ({services})")
        print(f"lab up: {up:.1f} s")
        print(f"push {len(images)} images to the lab's registry: {push:.1f} s")
        print(f"deploy through the master from built images (hosts pull): {deploy:.1f} s")
        print(f"no-op converge through the master: median {sorted(noops)[1]:.1f} s (runs: "
              f"{', '.join(f'{n:.1f}' for n in noops)}; goal <= 10 s, ratio {sorted(noops)[1] / 10:.2f})")
        print(f"upgrade orchestration of memcached, batch 1: {upgrade:.1f} s, {upgrade / hosts:.1f} s per host")
    finally:
        down = timed(*lab[:1], "down", *lab[1:])
        print(f"lab down: {down:.1f} s")


if __name__ == "__main__":
    main()
