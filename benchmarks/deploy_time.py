#!/usr/bin/env python3
"""Times `kolla-salt deploy` of the all-in-one set from built images, then a
no-op redeploy. Usage: .venv/bin/python benchmarks/deploy_time.py [--help]"""
import sys

from common import BenchEnv


def main():
    if "--help" in sys.argv:
        print(__doc__)
        return
    env = BenchEnv("kbench-deploy-")
    try:
        env.run("build", "mariadb", "rabbitmq", "memcached", "keystone", "toolbox")
        first = env.timed("deploy")
        noop = env.timed("deploy")
        print(f"deploy (mariadb, rabbitmq, memcached, keystone + 5 jobs) from built images: {first:.1f} s")
        print(f"no-op redeploy (nothing changed):                                     {noop:.1f} s")
        print(f"ratio first/no-op: {first / noop:.1f}x")
    finally:
        env.close()


if __name__ == "__main__":
    main()
