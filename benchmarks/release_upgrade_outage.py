#!/usr/bin/env python3
"""What a client sees while the whole all-in-one cloud is upgraded to the next
OpenStack release (`kolla-salt upgrade --release NEXT`).

A client asks keystone for a token every 100 ms (bounded: at most --max-requests,
for at most the upgrade plus 2 s) and counts failed requests and the longest
gap between two tokens. Two cases, each in a fresh deployment:
  same      the infrastructure images (mariadb, rabbitmq, memcached, cron,
            toolbox) have the same content in both releases: one image, two tags,
            so only keystone is replaced (what kolla-salt does now);
  distinct  the next release's infrastructure tags are given other content (a
            label), so every container is recreated, as before images were
            compared by id: the database and the broker restart under load.
Images are the kolla-salt ones, re-tagged under the namespace kolla-bench (removed
at the end). Usage: .venv/bin/python benchmarks/release_upgrade_outage.py [--help]
    [--release 2026.1] [--next 2026.2] [--max-requests 3000]
"""
import argparse
import io
import time

import docker

from common import BenchEnv, Prober, token_request
from kolla_salt.containers.spec import LABEL_RELEASE
from kolla_salt.declaration.settings import default_tag
from kolla_salt.images.build import discover

NAMESPACE = "kolla-bench"
SERVICE_IMAGES = sorted(set(discover()) - {"base"})   # every image a service or job runs


def tag_images(client, release, next_release, distinct):
    """kolla-bench/<image>:<tag> for both releases; with `distinct`, the next
    release's infrastructure images (those without a kolla.release label: the
    same content in every release) get content of their own."""
    made = []
    for release_ in (release, next_release):
        for name in SERVICE_IMAGES:
            tag = default_tag(release_)
            image = client.images.get(f"kolla-salt/{name}:{tag}")
            if distinct and release_ == next_release and LABEL_RELEASE not in image.labels:
                image, _ = client.images.build(fileobj=io.BytesIO(f"FROM {image.id}\nLABEL kolla.bench=distinct\n"
                                                                  .encode()), rm=True)
            image.tag(f"{NAMESPACE}/{name}", tag)
            made.append(f"{NAMESPACE}/{name}:{tag}")
    return made


def measure(case, release, next_release, max_requests):
    client = docker.from_env(timeout=600)
    made = tag_images(client, release, next_release, case == "distinct")
    env = BenchEnv(f"kbrel{case[:3]}-", openstack_release=release, kolla_install_type="source",
                   docker_namespace=NAMESPACE, enable_cron=True)
    try:
        env.run("deploy")
        password = env.passwords()["keystone_admin_password"]
        tokens = Prober(token_request(env.globals["keystone_public_port"], password), 0.1, limit=max_requests)
        tokens.start()
        time.sleep(1)
        started = time.monotonic()
        env.run("upgrade", "--release", next_release)
        took = time.monotonic() - started
        time.sleep(2)
        tokens.stop()
        print(f"{case:9} upgrade {took:5.1f} s: {tokens.calls} token requests, {tokens.failed} failed, "
              f"longest gap {tokens.longest_gap() * 1000:.0f} ms", flush=True)
        return tokens.failed, tokens.longest_gap()
    finally:
        env.close()
        for ref in made:
            client.images.remove(ref)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--release", default="2026.1")
    parser.add_argument("--next", default="2026.2")
    parser.add_argument("--max-requests", type=int, default=3000)
    args = parser.parse_args()
    same = measure("same", args.release, args.next, args.max_requests)
    distinct = measure("distinct", args.release, args.next, args.max_requests)
    print(f"failed requests: {distinct[0]} -> {same[0]}; longest gap: {distinct[1] * 1000:.0f} ms -> "
          f"{same[1] * 1000:.0f} ms ({distinct[1] / max(same[1], 0.001):.1f}x shorter)")


if __name__ == "__main__":
    main()
