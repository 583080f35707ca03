#!/usr/bin/env python3
"""Failed requests while keystone is upgraded on the all-in-one host, behind
haproxy (blue/green swaps) and without it (overlapping swaps on one port).

Clients ask keystone through the address a user has (the VIP with haproxy, the
host's address without) for the whole run: one issues tokens, the others list
projects with a token, each at a steady pace. Meanwhile `kolla-salt upgrade
--services keystone` moves keystone to a new image ROUNDS times (the built image
plus a label: really new content, without minutes of builds). Printed per mode:
requests sent, failed, the longest time without an answer. Goal with haproxy:
0 failed of at least 2,000.
Usage: .venv/bin/python benchmarks/rolling_upgrade.py [--help] [--rounds N] [--listers N]
"""
import argparse
import io
import time

import docker

from common import BenchEnv, Prober, projects_listed, token_issue, token_request
from kolla_salt.declaration.settings import default_settings

INTERVAL = 0.02


def run_mode(client, haproxy, rounds, listers, extra_tags):
    env = BenchEnv("kbench-rolling-", enable_rabbitmq=False, enable_haproxy=haproxy)
    try:
        env.run("build", "mariadb", "memcached", "keystone", "toolbox", *(["haproxy"] if haproxy else []))
        env.run("deploy")
        port = env.globals["keystone_public_port"]
        # What clouds.yaml says: the VIP behind haproxy, the host's (loopback) address without.
        address = default_settings()["kolla_internal_vip_address"] if haproxy else "127.0.0.1"
        password = env.passwords()["keystone_admin_password"]
        with token_issue(port, password, address, project="admin", timeout=10) as answer:
            token = answer.headers["X-Subject-Token"]
        probers = [Prober(token_request(port, password, address), INTERVAL, limit=100000)]
        probers += [Prober(projects_listed(port, token, address), INTERVAL, limit=100000) for _ in range(listers)]
        image = client.containers.get(env.prefix + "keystone").image
        for prober in probers:
            prober.start()
        started = time.monotonic()
        swaps = []
        for round_ in range(1, rounds + 1):
            tag = f"kbench-rolling-{int(haproxy)}-{round_}"
            ref = f"kolla-salt/keystone:{tag}"
            client.images.build(fileobj=io.BytesIO(f"FROM {image.id}\nLABEL kolla.bench={tag}\n".encode()),
                                tag=ref, rm=True)
            extra_tags.append(ref)
            env.write_globals(keystone_tag=tag)
            began = time.monotonic()
            env.run("upgrade", "--services", "keystone")
            swaps.append(time.monotonic() - began)
            time.sleep(1)
        ended = time.monotonic()
        for prober in probers:
            prober.stop()
        sent = sum(p.calls for p in probers)
        failed = sum(p.failed for p in probers)
        gap = max(p.longest_gap(started, ended) for p in probers)
        mode = "behind haproxy (blue/green)" if haproxy else "without haproxy (overlap)"
        print(f"{mode:28} {rounds} upgrades, {sent} requests, {failed} failed, longest gap {gap:.2f} s, "
              f"upgrade command {min(swaps):.1f}-{max(swaps):.1f} s", flush=True)
        return sent, failed
    finally:
        env.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="keystone upgrades per mode (default 5)")
    parser.add_argument("--listers", type=int, default=3, help="clients listing projects (default 3)")
    args = parser.parse_args()
    client = docker.from_env()
    extra_tags = []
    try:
        sent, failed = run_mode(client, True, args.rounds, args.listers, extra_tags)
        run_mode(client, False, args.rounds, args.listers, extra_tags)
        print(f"goal with haproxy: 0 failed of >= 2000: {'met' if failed == 0 and sent >= 2000 else 'not met'}")
    finally:
        for ref in extra_tags:
            client.images.remove(ref, force=True)


if __name__ == "__main__":
    main()
