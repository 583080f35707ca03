#!/usr/bin/env python3
"""Times `kolla-salt build` of the images `make deploy` builds (the enabled
services' of pillar/examples/globals-aio.yml, and their parents) from nothing: a
new debootstrapped rootfs, so no layer of Docker's build cache applies. It builds
under its own namespace (kbench-build/...) and removes those images at the end.
Prints each image's build time and the total.
Usage: .venv/bin/python benchmarks/build_time.py [--help]"""
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import yaml

from common import KOLLA

NAMESPACE = "kbench-build"
AIO_GLOBALS = Path(__file__).resolve().parent.parent / "pillar" / "examples" / "globals-aio.yml"
# A step starts: the rootfs's debootstrap, or an image's build (kolla_salt.images.build's progress).
STARTED = re.compile(r"\[build\] (?:rootfs: (debootstrap)|\((\d+/\d+)\) \S+?/(\S+): building)")


def main():
    if "--help" in sys.argv:
        print(__doc__)
        return
    client = docker.from_env()
    config_dir = Path(tempfile.mkdtemp(prefix="kolla-bench-build-"))
    aio = yaml.safe_load(AIO_GLOBALS.read_text())
    (config_dir / "globals.yml").write_text(yaml.safe_dump({**aio, "docker_namespace": NAMESPACE}))
    times, current, began = {}, None, time.monotonic()
    try:
        proc = subprocess.Popen([KOLLA, "--config-dir", str(config_dir), "build"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            now = time.monotonic()
            started = STARTED.search(line)
            if started or line.startswith("[build] done"):
                if current:
                    times[current[0]] = now - current[1]
                current = ("rootfs (debootstrap)" if started.group(1) else started.group(3), now) if started else None
                if started:
                    print(f"{now - began:5.0f} s: {current[0]} {started.group(2) or ''}", flush=True)
        if proc.wait() != 0:
            raise SystemExit(f"kolla-salt build failed (exit {proc.returncode})")
        total = time.monotonic() - began
        print("\nbuild time of each step (an image from its parent):")
        for image, seconds in sorted(times.items(), key=lambda item: -item[1]):
            print(f"  {image:40} {seconds:6.1f} s")
        print(f"every image `make deploy` builds ({len(times)}), from nothing (rootfs included): {total:.0f} s")
    finally:
        # Children first: Docker does not remove an image that others are built on.
        for image in sorted(client.images.list(), key=lambda i: i.attrs["Created"], reverse=True):
            if any(tag.startswith(f"{NAMESPACE}/") for tag in image.tags):
                client.images.remove(image.id, force=True)
        shutil.rmtree(config_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
