#!/usr/bin/env python3
"""Times `kolla-salt deploy` of the all-in-one set from built images, then a
no-op redeploy. Usage: .venv/bin/python benchmarks/deploy_time.py [--help]"""
import json
import sys

from common import BenchEnv


def main():
    if "--help" in sys.argv:
        print(__doc__)
        return
    env = BenchEnv("kbench-deploy-", enable_glance=True, enable_placement=True, enable_haproxy=True)   # the default AIO
    try:
        env.run("build")
        first = env.timed("deploy")
        noop = env.timed("deploy")
        status = json.loads(env.run("status", "--format", "json"))
        deployed = ", ".join(row["name"].removeprefix(env.prefix) for row in status["containers"])
        print(f"deploy of the all-in-one set ({deployed}; with its jobs) from built images: {first:.1f} s")
        print(f"no-op redeploy (nothing changed): {noop:.1f} s")
        print(f"ratio first/no-op: {first / noop:.1f}x")
    finally:
        env.close()


if __name__ == "__main__":
    main()
