#!/usr/bin/env python3
"""False restarts under host saturation (goal: 0), and the longest time a
client waited for an answer from any service.

Deploys the all-in-one set (cron, mariadb, rabbitmq, memcached, keystone) with
the health loop on and its default settings, on its own names and loopback
ports (benchmarks/common.py), lets the loop see everything pass, then
saturates the host for --seconds (default 300): two busy loops per CPU and
two writers of 256 MiB files with fsync (tests/integration/health_helpers.py:
host_load, every process bounded by `timeout`). Meanwhile a client asks each
service every 0.5 s for an answer (memcached `version`, MariaDB's greeting,
RabbitMQ's Connection.Start, keystone's GET /v3; 10 s timeout each).

Prints: restarts of any container (its StartedAt changed; the loop's
`restarted` events), what the loop reported (slow, failing, unhealthy), how
many checks it judged slow (failed, but load explained it), and per
service the longest time between two answers (unavailability as a client sees it).

Usage: .venv/bin/python benchmarks/false_restarts.py [--seconds N] [--pressure-limit 1]
"""
import argparse
import socket
import sys
import time
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration")]
from common import PORTS, BenchEnv, Prober, keystone_answers, memcached_answers  # noqa: E402
from kolla_salt.declaration.settings import default_settings  # noqa: E402
from kolla_salt.healing import healthloop  # noqa: E402
from kolla_salt.healing.health import read_json  # noqa: E402
from health_helpers import host_load  # noqa: E402

PROBE_TIMEOUT, PROBE_EVERY = 10, 0.5


def _exchange(port, send, expect):
    """Whether the service at `port` answers (`expect` in what it sends back)."""
    with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT) as conn:
        if send:
            conn.sendall(send)
        data = b""
        while expect not in data or not data:
            chunk = conn.recv(4096)
            if not chunk:
                return False
            data += chunk
        return True


PROBES = {
    "memcached": lambda: memcached_answers(PORTS["memcached_port"], PROBE_TIMEOUT),
    "mariadb": lambda: _exchange(PORTS["database_port"], None, b""),            # the server's greeting
    "rabbitmq": lambda: _exchange(PORTS["rabbitmq_port"], b"AMQP\x00\x00\x09\x01", b"\x01\x00\x00"),  # Connection.Start
    "keystone": lambda: keystone_answers(PORTS["keystone_public_port"], PROBE_TIMEOUT),
}


def started_at(client, prefix):
    return {c.name: c.attrs["State"]["StartedAt"] for c in client.containers.list(all=True)
            if c.name.startswith(prefix) and "." not in c.name.removeprefix(prefix)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=300, help="how long the host is saturated")
    parser.add_argument("--busy-per-cpu", type=int, default=2, help="busy loops per CPU")
    parser.add_argument("--writers", type=int, default=2, help="parallel writers of fsync'd files")
    parser.add_argument("--pressure-limit", type=float,
                        help="health_pressure_limit (1: load explains nothing, as before the rule)")
    args = parser.parse_args()
    limit = {} if args.pressure_limit is None else {"health_pressure_limit": args.pressure_limit}
    env = BenchEnv("kbench-false-", enable_health_loop=True, **limit)
    client = docker.from_env(timeout=300)
    tap = None
    try:
        print("deploying the all-in-one set with the health loop ...", flush=True)
        env.run("deploy")
        settings = {**default_settings(), **env.globals}
        tap = healthloop.EventTap(settings)
        time.sleep(settings["health_check_interval"] * 2)   # the loop has seen every container pass
        before = started_at(client, env.prefix)
        clients = {name: Prober(probe, PROBE_EVERY) for name, probe in PROBES.items()}
        for probe in clients.values():
            probe.start()
        time.sleep(5)
        start = time.monotonic()
        print(f"saturating the host for {args.seconds} s: {len(before)} containers {sorted(before)}", flush=True)
        with host_load(args.seconds + 30, env.root, args.busy_per_cpu, args.writers):
            time.sleep(args.seconds)
        end = time.monotonic()
        time.sleep(5)
        for probe in clients.values():
            probe.stop()
        after = started_at(client, env.prefix)
        restarted = sorted(name for name in before if after.get(name) != before[name])
        reported = sorted({tag.split("/", 3)[-1] for at, tag, _ in tap.events
                           if at >= start and tag.startswith("salt/beacon/")})
        actions = sorted({tag for at, tag, _ in tap.events if at >= start and tag.startswith("kolla/health/")})
        print(f"containers restarted: {len(restarted)} {restarted} (goal 0)")
        print(f"health loop actions: {actions or 'none'}")
        print(f"health loop reports: {reported or 'none'}")
        seen = read_json(healthloop.status_file(settings))
        print("checks judged slow (load, not counted): " +
              ", ".join(f"{name.removeprefix(env.prefix)} {s['slow_checks']}" for name, s in seen.items()))
        for name, probe in clients.items():
            print(f"{name:10} longest time without an answer: {probe.longest_gap(start, end):5.1f} s "
                  f"({len([t for t in probe.answers if start < t < end])} answers, {probe.failed} failed probes)")
        worst = max(clients.items(), key=lambda item: item[1].longest_gap(start, end))
        print(f"longest unavailability: {worst[1].longest_gap(start, end):.1f} s ({worst[0]})")
    finally:
        if tap:
            tap.close()
        env.close()


if __name__ == "__main__":
    main()
