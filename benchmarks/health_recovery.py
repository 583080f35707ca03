#!/usr/bin/env python3
"""How long a hung service stays down with the health loop running.

Starts the all-in-one health daemon (kolla_salt.healthloop) for containers of
its own (`kshealthbench<random>-`), freezes the service inside a container
(SIGSTOP to its processes: alive, check failing, Docker does nothing) and
measures, from the freeze: the beacon's `unhealthy` event, the reactor's
`restarted` event, and the container passing its own check again. Prints
the figures per service and setting, next to the worst detection time
(kolla_salt.health.worst_detection).

Services: memcached and, when its image exists (a plain `kolla-salt build`
makes both), keystone under uwsgi serving its version
document (a standalone keystone: fernet keys made at start, no database, which
/v3 does not need; its check is the same as in a deployment).

The restart cap and backoff are lifted here (cap 1000, backoff 0) so rounds
measure recovery, not the storm protection.

Usage: .venv/bin/python benchmarks/health_recovery.py [--rounds N] [--fast-only]
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
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kolla_salt import healthloop, paths  # noqa: E402
from kolla_salt.containers import ContainerManager, passes_check  # noqa: E402
from kolla_salt.health import worst_detection  # noqa: E402
from kolla_salt.inventory import ServiceRenderer, default_image, default_settings  # noqa: E402
from kolla_salt.spec import ContainerSpec  # noqa: E402

FREEZE = ("import os, signal, sys\n"
          "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
          "    if int(pid) in (1, os.getpid()): continue\n"
          "    try: cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
          "    except OSError: continue\n"
          "    if sys.argv[1].encode() in cmd: os.kill(int(pid), signal.SIGSTOP)\n")

SERVICES = {
    "memcached": dict(
        image=default_image("memcached"), process="memcached", user=None, start_period=0,
        command=["/usr/bin/memcached", "-u", "memcache", "-l", "127.0.0.1", "-p", "11211", "-m", "16"],
        test=["kolla_check", "memcached", "127.0.0.1:11211"]),
    "keystone": dict(
        # Keystone needs ~5 s to answer after a start: without a start period a
        # fast loop would restart it again before it is up.
        image=default_image("keystone"), process="uWSGI", user="keystone", start_period=10,
        command=["sh", "-c", "keystone-manage fernet_setup --keystone-user keystone --keystone-group keystone"
                             " && exec kolla_keystone_serve 127.0.0.1 5000"],
        test=["kolla_check", "http-unix", "/var/lib/keystone/uwsgi.sock", "/v3", "200"]),
}
SETTINGS = {   # name: (interval, threshold); check timeouts are the services' own (check_timeout)
    "defaults (interval 5 s, threshold 3)": (5, 3),
    "fast (interval 1 s, threshold 2)": (1, 2),
}


def check_timeout(service):
    """The check timeout of the service's own definition (salt/states/kolla/<service>/defaults.yaml),
    rendered as a deploy renders it (placeholder passwords: only the timeout is read)."""
    passwords = {key: "benchmark" for key in yaml.safe_load((paths.DEFAULTS_DIR / "passwords.yml").read_text())}
    renderer = ServiceRenderer(default_settings(), passwords, {"api_interface_address": "127.0.0.1"})
    return renderer.definition(service)["containers"][service]["healthcheck"]["timeout"]


def spec_for(name, service, interval, timeout):
    return ContainerSpec.from_dict({
        "name": name, "image": service["image"], "set_path": "benchmark/health", "user": service["user"],
        "command": service["command"], "stop_timeout": 2,
        "healthcheck": {"test": service["test"], "interval": interval, "timeout": timeout,
                        "retries": 3, "start_period": service["start_period"]},
    }, where=f"benchmark spec {name}")


def one_round(client, tap, spec, process, limit=120):
    container = client.containers.get(spec.name)
    started = container.attrs["State"]["StartedAt"]
    frozen = time.monotonic()
    result = container.exec_run(["python3", "-c", FREEZE, process])
    assert result.exit_code == 0, result.output
    while time.monotonic() - frozen < limit:
        container.reload()
        if container.attrs["State"]["StartedAt"] != started and passes_check(container, spec):
            healthy = time.monotonic() - frozen
            unhealthy = tap.first(f"{spec.name}/unhealthy", since=frozen)
            restarted = tap.first(f"kolla/health/{spec.name}/restarted", since=frozen)
            return (unhealthy - frozen if unhealthy else None, restarted - frozen if restarted else None, healthy)
        time.sleep(0.1)
    raise RuntimeError(f"{spec.name} was not healthy again within {limit} s")


def measure(client, service_name, setting_name, rounds):
    interval, threshold = SETTINGS[setting_name]
    service = SERVICES[service_name]
    prefix = f"kshealthbench{uuid.uuid4().hex[:6]}-"
    folder = Path(tempfile.mkdtemp(prefix="kshealthbench", dir="/tmp"))
    settings = {**default_settings(), "kolla_state_directory": str(folder / "state"), "container_name_prefix": prefix,
                "health_check_interval": interval, "health_failure_threshold": threshold,
                "health_restart_cap": 1000, "health_restart_backoff": 0, "health_stop_timeout": 2}
    manager = ContainerManager(client=client, state_dir=folder / "state", health_timeout=120)
    timeout = check_timeout(service_name)
    spec = spec_for(f"{prefix}{service_name}", service, interval, timeout)
    tap = None
    try:
        manager.ensure(spec)
        healthloop.ensure_health_daemon(settings)
        tap = healthloop.EventTap(settings)
        figures = []
        for _ in range(rounds):
            # Freeze only once the beacon has seen it healthy and its start period is over.
            time.sleep(interval + 1 + service["start_period"])
            figures.append(one_round(client, tap, spec, service["process"]))
        return figures, worst_detection(interval, threshold, timeout)
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
    parser.add_argument("--fast-only", action="store_true", help="only the fast setting")
    args = parser.parse_args()
    client = docker.from_env(timeout=300)
    services = []
    for name, service in SERVICES.items():
        try:
            client.images.get(service["image"])
            services.append(name)
        except docker.errors.ImageNotFound:
            print(f"{name}: image {service['image']} is missing (kolla-salt build {name}); skipped")
    settings = [s for s in SETTINGS if not args.fast_only or s.startswith("fast")]
    print(f"{'service':10} {'setting':38} {'unhealthy event':>22} {'restarted event':>22} "
          f"{'healthy again':>22}  expected detection")
    for setting in settings:
        for service in services:
            figures, expected = measure(client, service, setting, args.rounds)
            detect, restart, healthy = zip(*figures)
            print(f"{service:10} {setting:38} {summary(detect):>22} {summary(restart):>22} "
                  f"{summary(healthy):>22}  <= {expected} s", flush=True)
    print(f"(median (min-max) over {args.rounds} rounds, seconds from the freeze; restart = docker restart -t 2)")


if __name__ == "__main__":
    main()
