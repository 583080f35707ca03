#!/usr/bin/env python3
"""Outage window of replacing a running service, for memcached and keystone.

A client asks the service every 20 ms; the longest gap between two answers is
the outage, and requests that failed are counted. `kolla-salt upgrade --services S`
to a new image (the built one plus a label: other content, so the container is
really replaced; a mere new tag of the same image changes nothing) is an atomic
swap: the new container is created while the old one serves, health-gated, and
the old one stopped and kept. It is compared with the naive compose-style
recreate (stop, remove, run again).
Usage: .venv/bin/python benchmarks/upgrade_outage.py [--help] [--rounds N] [--services S,S]
"""
import argparse
import io
import time

import docker

from common import BenchEnv, Prober, keystone_answers, memcached_answers

INTERVAL = 0.02


def measure(probe, replace):
    prober = Prober(probe, INTERVAL)
    prober.start()
    time.sleep(0.5)
    replace()
    deadline = time.monotonic() + 120
    mark = time.monotonic()
    while time.monotonic() < deadline and not any(t > mark for t in prober.answers):
        time.sleep(INTERVAL)
    time.sleep(0.5)
    prober.stop()
    return prober.longest_gap(), prober.failed


def naive_recreate(client, name):
    """What a compose-style recreate does: stop, remove, run the same container again."""
    old = client.containers.get(name)
    config, host = old.attrs["Config"], old.attrs["HostConfig"]
    old.stop()
    old.remove()
    created = client.api.create_container(
        image=config["Image"], name=name, environment=config["Env"], labels=config["Labels"],
        healthcheck=config.get("Healthcheck"),
        host_config=client.api.create_host_config(network_mode="host", binds=host["Binds"],
                                                  restart_policy=host["RestartPolicy"]))
    client.api.start(created)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--services", default="memcached,keystone")
    args = parser.parse_args()
    rounds = args.rounds
    client = docker.from_env()
    env = BenchEnv("kbench-outage-", enable_rabbitmq=False)
    extra_tags = []
    try:
        env.run("build", "mariadb", "memcached", "keystone", "toolbox")
        env.run("deploy")
        probes = {"memcached": lambda: memcached_answers(env.globals["memcached_port"], 0.5),
                  "keystone": lambda: keystone_answers(env.globals["keystone_public_port"])}
        for service in args.services.split(","):
            probe, name = probes[service], env.prefix + service
            # Every round upgrades to a new image (a label on the built one): the
            # same path as a release upgrade, without its minutes of image builds.
            image = client.containers.get(name).image
            rounds_done = iter(range(1, 1000))

            def upgrade():
                tag = f"kbench-outage-{next(rounds_done)}"
                client.images.build(fileobj=io.BytesIO(f"FROM {image.id}\nLABEL kolla.bench={tag}\n".encode()),
                                    tag=f"kolla-salt/{service}:{tag}", rm=True)
                extra_tags.append(f"kolla-salt/{service}:{tag}")
                env.write_globals(**{f"{service}_tag": tag})
                env.run("upgrade", "--services", service)

            swap = [measure(probe, upgrade) for _ in range(rounds)]
            naive = [measure(probe, lambda: naive_recreate(client, name)) for _ in range(rounds)]
            gaps, naive_gaps = [g for g, _ in swap], [g for g, _ in naive]
            print(f"{service:9} kolla-salt upgrade: {min(gaps) * 1000:7.0f} ms (worst {max(gaps) * 1000:.0f}), "
                  f"failed requests {sum(f for _, f in swap)} in {rounds} swaps   "
                  f"naive recreate: {min(naive_gaps) * 1000:7.0f} ms (worst {max(naive_gaps) * 1000:.0f}), "
                  f"failed {sum(f for _, f in naive)}   naive/upgrade: {min(naive_gaps) / min(gaps):.2f}x", flush=True)
    finally:
        env.close()
        for ref in extra_tags:
            client.images.remove(ref)


if __name__ == "__main__":
    main()
