#!/usr/bin/env python3
"""The highly available control plane on a lab of 3 hosts on this machine (its own
name, kbench; removed at the end): every host a control host (mariadb as a Galera
cluster, rabbitmq as a cluster, memcached, keystone, haproxy and keepalived with
the VIP 198.18.0.10). Figures:
  - the HA deploy through the master from built images (the hosts pull), then
    `deploy --test` and a deploy with nothing to change;
  - the clients below with nothing changing (at rest): the rate the lab answers;
  - a rolling keystone upgrade to a new image, host by host, while clients in a
    host's namespace ask through the VIP (a token client and --listers project
    listers): requests sent, failed, longest gap (goal: 0 failed of >= 2,000);
  - the same for mariadb's Galera members (keystone's requests read the database)
    and for memcached (keystone's cache); RabbitMQ's nodes under a client that
    publishes to a quorum queue and reads back;
  - VIP failover seen by a client: the holder's keepalived stopped;
  - Galera recovery after every member stopped (`mariadb-recovery`).
Usage: .venv/bin/python benchmarks/ha_lab.py [--help] [--listers N] [--every S] [--rest S]"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import docker
import yaml

from common import noop_deploy, timed

LAB, VIP = "kbench", "198.18.0.10"
PROBES = str(Path(__file__).resolve().parent.parent / "tests" / "probes.py")


def client(host, password=None, *args, env=None):
    """tests/probes.py in `host`'s namespace (keystone through the VIP unless `args`
    say otherwise); .communicate(input="") ends it."""
    return subprocess.Popen(["ip", "netns", "exec", host["namespace"], sys.executable, PROBES, "--address", VIP,
                             *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **({"KST_ADMIN_PASSWORD": password} if password else {}), **(env or {})})


def figures(probe):
    """What a client counted (and the rate it reached: below the rate asked for, the
    lab is saturated and every extra load lengthens the answers), and when and why
    its first failures failed."""
    seen = json.loads(probe.communicate(input="", timeout=300)[0])
    wall = time.time() - time.monotonic()   # the probe's times are this machine's monotonic clock
    why = "".join(f"\n    a request sent at {time.strftime('%H:%M:%S', time.gmtime(f['at'] + wall))} failed after "
                  f"{f['took']} s: {f['why']}" for f in seen["failures"])
    answers = seen["answers"]
    rate = (len(answers) - 1) / (answers[-1] - answers[0]) if len(answers) > 1 else 0
    return (f"{seen['sent']} requests ({rate:.1f} answered/s), {seen['failed']} failed, "
            f"longest gap {seen['gap']:.2f} s{why}"), seen


def vip_holder(hosts, other_than=None, timeout=30):
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        holders = [h for h in hosts if f"inet {VIP}/" in subprocess.run(
            ["ip", "-n", h["namespace"], "-4", "-o", "addr", "show", "dev", "eth0"],
            capture_output=True, text=True).stdout]
        if len(holders) == 1 and holders[0] is not other_than:
            return holders[0], time.monotonic() - began
        time.sleep(0.1)
    raise SystemExit(f"no single VIP holder after {timeout} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listers", type=int, default=3, help="clients listing projects during the upgrade")
    parser.add_argument("--every", type=float, default=0.02, help="seconds between two requests of a client")
    parser.add_argument("--rest", type=float, default=30, help="seconds the clients run before any upgrade")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kolla_salt.declaration.settings import load_settings
    from kolla_salt.images.build import image_ref, push
    from kolla_salt.lab.namespaces import Lab
    lab = Lab(LAB, 3)
    local = docker.from_env()
    new_refs = []
    try:
        up = timed("lab", "up", "--name", LAB, "--hosts", "3")
        described = lab.describe()
        hosts, folder = described["hosts"], Path(described["config_dir"])
        settings = yaml.safe_load((folder / "globals.yml").read_text())
        settings.update(enable_haproxy=True, enable_keepalived=True, kolla_internal_vip_address=VIP,
                        enable_glance=False, enable_placement=False,
                        roles={"control": [h["name"] for h in hosts], "compute": []})
        (folder / "globals.yml").write_text(yaml.safe_dump(settings))
        pushed = timed("--lab", LAB, "build", "--push")
        deploy = timed("--lab", LAB, "deploy")
        print(f"lab up {up:.1f} s; images pushed to its registry {pushed:.1f} s")
        print(f"HA deploy of 3 control hosts through the master from built images: {deploy:.1f} s")
        predicted = timed("--lab", LAB, "deploy", "--test")
        noops = [noop_deploy(["--lab", LAB], [("the preflight: facts, pillars, checks", "[deploy] host1: "),
                                               ("the prediction", "[deploy] predicted: ")], "what follows: client files")
                 for _ in range(3)]
        print(f"then through the master: deploy --test {predicted:.1f} s, a deploy with nothing to change "
              f"{statistics.median(t for t, _ in noops):.1f} s (median of 3, goal 5 s); where its time goes: "
              + ", ".join(f"{label} {s:.2f} s" for label, s in min(noops)[1]))
        passwords = yaml.safe_load((folder / "passwords.yml").read_text())
        password = passwords["keystone_admin_password"]

        holder, _ = vip_holder(hosts)
        watcher = next(h for h in hosts if h is not holder)
        pace = ["--every", str(args.every), "--limit", "100000"]
        load = [*pace, "--listers", str(args.listers)]
        # The same clients with nothing changing: what the upgrades' figures compare with
        # (once keystone issues their token: right after the deploy it is still busy).
        probe = client(watcher, password, *load, "--settle", "120")
        time.sleep(args.rest)
        text, _ = figures(probe)
        print(f"at rest, {args.rest:.0f} s (VIP on {holder['name']}, clients on {watcher['name']}): {text}")

        def rolling_upgrade(service, start_client=lambda: client(watcher, password, *load)):
            """`service` upgraded host by host to a really new image (the built one plus a
            label, in the lab's registry) under clients on `watcher` (keystone's unless
            `start_client` starts others), started once the image is pushed; its figures."""
            lab_settings = load_settings(folder)
            current = local.images.get(image_ref(lab_settings, service))
            tag = "kbench-rolling"
            ref = image_ref(lab_settings, service, tag)
            built, _ = local.images.build(fileobj=io.BytesIO(f"FROM {current.id}\nLABEL kolla.bench={tag}\n".encode()),
                                          tag=ref, rm=True)
            new_refs.append(ref)
            push(ref, built.id, insecure=True, netns=lab.master().netns)
            probe = start_client()
            time.sleep(2)
            settings[f"{service}_tag"] = tag
            (folder / "globals.yml").write_text(yaml.safe_dump(settings))
            upgrade = timed("--lab", LAB, "upgrade", "--services", service)
            time.sleep(2)
            text, seen = figures(probe)
            print(f"rolling {service} upgrade on 3 hosts (VIP on {holder['name']}, clients on {watcher['name']}): "
                  f"upgrade {upgrade:.1f} s; {text}; goal 0 failed of >= 2000: "
                  f"{'met' if seen['failed'] == 0 and seen['sent'] >= 2000 else 'not met'}")

        rolling_upgrade("keystone")
        # Galera members one at a time, each drained in every haproxy first (its
        # clients' connections move to the next member before it stops).
        rolling_upgrade("mariadb")
        # memcached members one at a time: keystone caches tokens and their
        # validations in all three (the clients' requests use them).
        rolling_upgrade("memcached")
        # RabbitMQ nodes one at a time, each drained first (maintenance mode: its
        # clients move to the other nodes, its quorum queues elect leaders there),
        # under a client that publishes to a quorum queue and reads back, moving to
        # the next node when one closes its connection (as oslo.messaging does).
        nodes = ",".join(h["address"] for h in hosts)
        login = {"KST_AMQP_USER": load_settings(folder)["rabbitmq_user"], "KST_AMQP_PASSWORD": passwords["rabbitmq_password"]}
        rolling_upgrade("rabbitmq", lambda: client(watcher, None, "--amqp", nodes, *pace, env=login))

        probe = client(watcher)
        time.sleep(2)
        engine = docker.DockerClient(base_url=holder["docker_host"], timeout=120)
        engine.containers.get("keepalived").stop()
        new, moved = vip_holder(hosts, other_than=holder)
        time.sleep(3)
        text, _ = figures(probe)
        engine.containers.get("keepalived").start()
        print(f"VIP failover, keepalived stopped on {holder['name']}: VIP on {new['name']} after {moved:.1f} s; "
              f"a client on {watcher['name']}: {text}")

        for host in hosts:
            docker.DockerClient(base_url=host["docker_host"], timeout=120).containers.get("mariadb").stop()
        recovery = timed("--lab", LAB, "mariadb-recovery")
        print(f"Galera recovery after all 3 members stopped: {recovery:.1f} s (mariadb-recovery)")
    finally:
        down = timed("lab", "down", "--name", LAB, "--hosts", "3")
        print(f"lab down: {down:.1f} s")
        for ref in new_refs:   # lab down untags what it pushed: this one may be gone already
            if local.images.list(name=ref):
                local.images.remove(ref, force=True)


if __name__ == "__main__":
    main()
