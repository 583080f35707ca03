#!/usr/bin/env python3
"""How long a hung service stays down with the health loop running (goal: 10 s).

Starts the all-in-one health daemon (kolla_salt.healing.healthloop) with the default
settings (`kolla-salt settings`) for containers of its own
(`kshealthbench<random>-`), freezes the service inside a container (SIGSTOP
to its processes: alive, check failing, Docker does nothing) and measures,
from the freeze: the beacon's `unhealthy` event, the reactor's `restarted`
event, and the container passing its own check again.

Services: memcached and, when its image exists (a plain `kolla-salt build`
makes both), keystone under uwsgi serving its version document (a standalone
keystone: fernet keys made at start, no database, which /v3 does not need),
each with the check timings of its deployed definition
(tests/integration/health_helpers.py: STANDALONE, standalone_spec).

The restart cap and backoff are lifted here (cap 1000, backoff 0) so rounds
measure recovery, not the storm protection.

Usage: .venv/bin/python benchmarks/health_recovery.py [--rounds N]
"""
import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "integration")]
from kolla_salt.containers.engine import passes_check  # noqa: E402
from kolla_salt.containers.manager import ContainerManager  # noqa: E402
from kolla_salt.declaration.settings import default_settings  # noqa: E402
from kolla_salt.healing import healthloop  # noqa: E402
from health_helpers import STANDALONE, standalone_spec  # noqa: E402
from probes import freeze_service  # noqa: E402

GOAL = 10


def one_round(client, tap, spec, process, limit=120):
    container = client.containers.get(spec.name)
    started = container.attrs["State"]["StartedAt"]
    frozen = time.monotonic()
    freeze_service(container, process)
    while time.monotonic() - frozen < limit:
        container.reload()
        if container.attrs["State"]["StartedAt"] != started and passes_check(container, spec):
            healthy = time.monotonic() - frozen
            unhealthy = tap.first(f"{spec.name}/unhealthy", since=frozen)
            restarted = tap.first(f"kolla/health/{spec.name}/restarted", since=frozen)
            return (unhealthy - frozen if unhealthy else None, restarted - frozen if restarted else None, healthy)
        time.sleep(0.1)
    raise RuntimeError(f"{spec.name} was not healthy again within {limit} s")


def measure(client, service_name, rounds):
    prefix = f"kshealthbench{uuid.uuid4().hex[:6]}-"
    folder = Path(tempfile.mkdtemp(prefix="kshealthbench", dir="/tmp"))
    settings = {**default_settings(), "kolla_state_directory": str(folder / "state"), "container_name_prefix": prefix,
                "health_restart_cap": 1000, "health_restart_backoff": 1}
    manager = ContainerManager(client=client, state_dir=folder / "state", health_timeout=120)
    spec = standalone_spec(f"{prefix}{service_name}", service_name)
    tap = None
    try:
        manager.ensure(spec)
        healthloop.ensure_health_daemon(settings)
        tap = healthloop.EventTap(settings)
        figures = []
        for _ in range(rounds):
            # Freeze only once the beacon has seen it pass (and its start is over).
            time.sleep(settings["health_check_interval"] + 2)
            figures.append(one_round(client, tap, spec, STANDALONE[service_name]["process"]))
        return figures
    finally:
        if tap:
            tap.close()
        healthloop.stop_health_daemon(settings)
        for entry in client.api.containers(all=True, filters={"name": prefix}):
            try:
                client.api.remove_container(entry["Id"], force=True)
            except docker.errors.NotFound:
                pass
        shutil.rmtree(folder, ignore_errors=True)


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return "    n/a"
    return f"{statistics.median(values):5.1f} s ({min(values):.1f}-{max(values):.1f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=300)
    services = []
    for name, service in STANDALONE.items():
        try:
            client.images.get(service["image"])
            services.append(name)
        except docker.errors.ImageNotFound:
            print(f"{name}: image {service['image']} is missing (kolla-salt build {name}); skipped")
    defaults = default_settings()
    print(f"default settings: check every {defaults['health_check_interval']} s, "
          f"{defaults['health_retry_interval']} s while failing, threshold {defaults['health_failure_threshold']}, "
          f"stopped-process probe {defaults['health_stopped_probe']} s")
    print(f"{'service':10} {'unhealthy event':>22} {'restarted event':>22} {'healthy again':>22}  goal")
    for service in services:
        detect, restart, healthy = zip(*measure(client, service, args.rounds))
        verdict = "met" if max(healthy) <= GOAL else "MISSED"
        print(f"{service:10} {summary(detect):>22} {summary(restart):>22} {summary(healthy):>22}  "
              f"<= {GOAL} s: {verdict}", flush=True)
    print(f"(median (min-max) over {args.rounds} rounds, seconds from the freeze)")


if __name__ == "__main__":
    main()
