#!/usr/bin/env python3
"""Times `kolla-salt build` of the images `make deploy` builds (the enabled
services' of pillar/examples/globals-aio.yml, and their parents) from nothing: a
new debootstrapped rootfs, so no layer of Docker's build cache applies. It builds
under its own namespace (kbench-build/...) and removes those images at the end.
Prints each image's build time and the total. --threads N sets build_threads (images
built at once; default the setting's default), so the totals of 1 and 4 compare.
Usage: .venv/bin/python benchmarks/build_time.py [--help] [--threads N]"""
import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import docker
import yaml

from common import KOLLA

NAMESPACE = "kbench-build"
AIO_GLOBALS = Path(__file__).resolve().parent.parent / "pillar" / "examples" / "globals-aio.yml"
# kolla_salt.images.build's progress: the rootfs's debootstrap, its import (the rootfs is
# made then), an image's build starting and ending.
STEP = re.compile(r"\[build\] (?:rootfs: (?P<rootfs>debootstrap|importing)|\(\d+/\d+\) \S+?/(?P<image>[^:\s]+):\S+: "
                  r"(?P<what>building|built in))")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, help="build_threads: images built at once")
    args = parser.parse_args()
    client = docker.from_env()
    config_dir = Path(tempfile.mkdtemp(prefix="kolla-bench-build-"))
    aio = yaml.safe_load(AIO_GLOBALS.read_text())
    threads = {"build_threads": args.threads} if args.threads else {}
    (config_dir / "globals.yml").write_text(yaml.safe_dump({**aio, "docker_namespace": NAMESPACE, **threads}))
    times, started, began = {}, {}, time.monotonic()
    try:
        proc = subprocess.Popen([KOLLA, "--config-dir", str(config_dir), "build"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            now, step = time.monotonic(), STEP.search(line)
            if not step:
                continue
            name = "rootfs (debootstrap)" if step["rootfs"] else step["image"]
            if step["rootfs"] == "importing" or step["what"] == "built in":
                times[name] = now - started.pop(name)
            else:
                started[name] = now
                print(f"{now - began:5.0f} s: {name}", flush=True)
        if proc.wait() != 0:
            raise SystemExit(f"kolla-salt build failed (exit {proc.returncode})")
        total = time.monotonic() - began
        print("\nbuild time of each step (an image from its parent):")
        for image, seconds in sorted(times.items(), key=lambda item: -item[1]):
            print(f"  {image:40} {seconds:6.1f} s")
        print(f"every image `make deploy` builds ({len(times) - 1}) and the rootfs, from nothing, "
              f"{args.threads or 'build_threads (default)'} at once: {total:.0f} s; their build times add up to "
              f"{sum(times.values()):.0f} s")
    finally:
        # Children first: Docker does not remove an image that others are built on.
        for image in sorted(client.images.list(), key=lambda i: i.attrs["Created"], reverse=True):
            if any(tag.startswith(f"{NAMESPACE}/") for tag in image.tags):
                client.images.remove(image.id, force=True)
        shutil.rmtree(config_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
