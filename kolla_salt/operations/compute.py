"""`kolla-salt compute drain HOST` and `undrain HOST`: a compute host emptied of its
servers without stopping them, so it can be upgraded, rebooted or taken out of the
compute role with no guest down.

drain first checks that the host's servers fit on the other compute hosts nova
schedules to (enabled and up), by placement's own figures: each server's
allocation against each host's inventory (total less reserved, times the
allocation ratio, less what is used; no single amount above max_unit). If one
does not fit, it refuses naming it and changes nothing. Then it disables the
host's nova-compute (reason DRAIN_REASON: the scheduler sends nothing new there)
and live-migrates the servers one at a time, the scheduler choosing where, and
with block migration where nova finds no shared storage (block_migration auto).
The drained state is nova's: a deploy leaves it, `undrain` enables the host again.

It speaks to the cloud as its admin, through openstacksdk with the operator
folder's clouds.yaml (the same cloud `init-runonce` uses).
"""
import time
from pathlib import Path

from ..errors import KollaError, ValidationError
from .clouds import CLOUD_NAME, clouds_file_problem

DRAIN_REASON = "kolla-salt compute drain"
# The resource classes a server's allocation is compared on, with their units in messages.
UNITS = {"VCPU": "VCPU", "MEMORY_MB": "MB", "DISK_GB": "GB"}


def free_room(inventories, usages):
    """{resource class: (free amount, largest single amount)} of one resource provider
    from placement's inventories ({class: {total, reserved, allocation_ratio, max_unit}})
    and usages ({class: used})."""
    return {rc: (int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"]) - usages.get(rc, 0), inv["max_unit"])
            for rc, inv in inventories.items()}


def unplaced(servers, room):
    """The servers that do not fit: `servers` [(name, {class: amount})] placed, the
    largest memory first, on the first host of `room` ({host: free_room}) with room
    for every class it needs; the room it takes is counted. Returns their names."""
    room = {host: dict(classes) for host, classes in room.items()}
    left = []
    for name, needs in sorted(servers, key=lambda server: -server[1].get("MEMORY_MB", 0)):
        host = next((host for host, classes in room.items()
                     if all(rc in classes and classes[rc][0] >= amount and classes[rc][1] >= amount
                            for rc, amount in needs.items())), None)
        if host is None:
            left.append(name)
            continue
        for rc, amount in needs.items():
            free, largest = room[host][rc]
            room[host][rc] = (free - amount, largest)
    return left


def describe(needs):
    """A server's allocation as a reader says it: '1 VCPU, 128 MB, 1 GB'."""
    return ", ".join(f"{needs[rc]} {unit}" for rc, unit in UNITS.items() if rc in needs)


def connect(config_dir):
    """The cloud of `config_dir` (its clouds.yaml) as its admin."""
    import openstack.config
    import openstack.connection
    problem = clouds_file_problem(config_dir)
    if problem:
        raise ValidationError([problem])
    config = openstack.config.OpenStackConfig(config_files=[str(Path(config_dir) / "clouds.yaml")])
    return openstack.connection.Connection(config=config.get_one(cloud=CLOUD_NAME))


class Compute:
    """The compute hosts of one cloud (`conn`: an openstacksdk connection)."""

    def __init__(self, conn, out=print):
        self.conn, self.out = conn, out

    def service(self, host):
        """HOST's nova-compute service; an error naming the compute hosts there are."""
        services = list(self.conn.compute.services(binary="nova-compute"))
        found = [service for service in services if service.host == host]
        if not found:
            raise ValidationError([f"compute host {host!r}: nova has no nova-compute there; its compute hosts: "
                                   + (", ".join(sorted(s.host for s in services)) or "none")])
        return found[0], services

    def servers_on(self, host):
        return list(self.conn.compute.servers(details=True, all_projects=True, compute_host=host))

    def placement(self, path):
        answer = self.conn.placement.get(path, microversion="1.10")
        if not answer.ok:
            raise KollaError(f"placement {path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def needs(self, server):
        """What `server` holds in placement, summed over its providers: {class: amount}."""
        total = {}
        for held in self.placement(f"/allocations/{server.id}")["allocations"].values():
            for rc, amount in held["resources"].items():
                total[rc] = total.get(rc, 0) + amount
        return total

    def room(self, hosts):
        """free_room of each of `hosts` (service host names), found through its
        hypervisor (whose id is its resource provider's, nova API 2.53 and later)."""
        room = {}
        for hypervisor in self.conn.compute.hypervisors(details=True):
            host = (hypervisor.service_details or {}).get("host")
            if host in hosts:
                inventories = self.placement(f"/resource_providers/{hypervisor.id}/inventories")["inventories"]
                usages = self.placement(f"/resource_providers/{hypervisor.id}/usages")["usages"]
                room[host] = free_room(inventories, usages)
        return room

    def drain(self, host, timeout=600):
        started = time.monotonic()
        service, services = self.service(host)
        targets = sorted(s.host for s in services if s.host != host and s.status == "enabled" and s.state == "up")
        servers = self.servers_on(host)
        needs = {server.id: self.needs(server) for server in servers}
        label = {server.id: f"{server.name} ({server.id})" for server in servers}
        left = unplaced([(server.id, needs[server.id]) for server in servers], self.room(targets))
        if left:
            where = ", ".join(targets) if targets else "none is enabled and up"
            raise ValidationError([f"compute drain {host}: these servers fit on no other compute host ({where}): "
                                   + "; ".join(f"{label[i]}: {describe(needs[i])}" for i in left)])
        self.out(f"[compute drain] {host}: {len(servers)} server(s) to move to {', '.join(targets) or 'no host'}")
        if service.status == "enabled":
            self.conn.compute.disable_service(service, disabled_reason=DRAIN_REASON)
            self.out(f"[compute drain] {host}: nova-compute disabled (reason '{DRAIN_REASON}'): nova schedules "
                     "nothing new there")
        for server in servers:
            self.move(server, host, label[server.id], started + timeout)
        self.out(f"[compute drain] {host}: drained in {time.monotonic() - started:.1f} s; "
                 f"`kolla-salt compute undrain {host}` lets nova schedule there again")

    def move(self, server, host, label, deadline):
        """Live-migrates `server` off `host` and waits until it runs elsewhere."""
        began = time.monotonic()
        self.out(f"[compute drain] {label}: live-migrating from {host}")
        self.conn.compute.live_migrate_server(server, host=None, block_migration="auto")
        while time.monotonic() < deadline:
            time.sleep(2)
            now = self.conn.compute.get_server(server.id)
            if now.status == "ERROR":
                raise KollaError(f"compute drain {host}: {label} went into ERROR while it migrated: "
                                 f"{(now.fault or {}).get('message', 'no fault given')}")
            # nova's API marks the server migrating before it answers; a migration
            # that ends without moving it (its checks or the copy failed) leaves it here.
            if now.task_state is None and now.status == "ACTIVE":
                if now.compute_host != host:
                    self.out(f"[compute drain] {label}: on {now.compute_host} after "
                             f"{time.monotonic() - began:.1f} s")
                    return
                raise KollaError(f"compute drain {host}: the live migration of {label} failed; it runs on {host} "
                                 f"still, which stays disabled (why: `openstack server event list {server.id}`, "
                                 f"nova-compute's log on {host})")
        raise KollaError(f"compute drain {host}: {label} is still migrating after the drain's timeout")

    def undrain(self, host):
        service, _ = self.service(host)
        if service.status == "enabled":
            self.out(f"[compute undrain] {host}: nova-compute is enabled already")
            return
        reason = service.disabled_reason or "no reason given"   # (the answer to enable_service clears it)
        self.conn.compute.enable_service(service)
        self.out(f"[compute undrain] {host}: nova-compute enabled (it was disabled: '{reason}'); nova schedules "
                 "servers there again")
