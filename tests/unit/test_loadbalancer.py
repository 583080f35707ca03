"""haproxy's config from the services' loadbalancer entries, the blue/green specs
derived from them, and the VIP's rules."""
import pytest
import yaml

from kolla_salt.containers.balancer import loadbalancer_entries
from kolla_salt.containers.spec import ContainerSpec
from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.errors import ValidationError
from operator_files import write_secrets


def operator_folder(folder, **globals_):
    write_secrets(folder)
    (folder / "globals.yml").write_text(yaml.safe_dump({"container_name_prefix": "t-", **globals_}))


def services(folder):
    return {s["name"]: s for s in build_pillar(folder, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]}


def section(config, header):
    """The lines of one section of haproxy's config (`backend keystone`), up to the next."""
    return config.split(f"\n{header}\n")[1].split("\n\n")[0]


def test_haproxy_fronts_every_api_service_on_the_vip_with_both_ports_of_each_as_servers(tmp_path):
    operator_folder(tmp_path)
    found = services(tmp_path)
    config = found["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    for name, port, standby in (("keystone", 5000, 5001), ("glance", 9292, 9293), ("placement", 8778, 8779)):
        assert f"frontend {name}\n    bind 127.0.0.10:{port}\n" in config
        backend = section(config, f"backend {name}")
        assert f"server 127.0.0.1:{port} 127.0.0.1:{port} check" in backend
        assert f"server 127.0.0.1:{standby} 127.0.0.1:{standby} check" in backend
    assert "timeout server 6h" in section(config, "backend glance")
    assert "timeout server 1m" in section(config, "backend keystone")
    # Every API container is swapped blue/green between its two ports; a drain waits
    # for the requests in flight as long as haproxy lets them run.
    keystone = ContainerSpec.from_dict(found["keystone"]["containers"][0]["spec"], "keystone")
    assert keystone.swap == "blue-green"
    assert keystone.listen == {"backend": "keystone", "address": "127.0.0.1", "ports": [5000, 5001],
                               "drain_timeout": 60}
    glance = ContainerSpec.from_dict(found["glance"]["containers"][0]["spec"], "glance")
    assert glance.listen["drain_timeout"] == 6 * 3600
    # Endpoints are the VIP's: the catalog, the services' keystone and clouds.yaml (kolla_internal_fqdn).
    assert "auth_url = http://127.0.0.10:5000" in found["glance"]["containers"][0]["files"]["glance-api.conf"]
    bootstrap = next(j for j in found["keystone"]["jobs"] if j["name"] == "t-keystone_bootstrap")
    assert "http://127.0.0.10:5000/v3" in bootstrap["command"]


def test_a_busy_api_queues_in_haproxy_and_an_api_with_every_server_down_is_waited_for(tmp_path):
    """A server takes as many requests as its uwsgi workers (maxconn); haproxy queues the
    others, for up to haproxy_queue_timeout s. When no server of a backend is up, the
    frontend sends requests to the `_waiting` backend: the same servers without a check,
    tried once a second as many times."""
    operator_folder(tmp_path, openstack_service_workers=3, haproxy_queue_timeout=20)
    config = services(tmp_path)["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    assert "    timeout queue 20s" in config and "    retries 20\n" in section(config, "defaults")
    for name in ("keystone", "glance", "placement"):
        servers = [line.split() for line in section(config, f"backend {name}").splitlines() if line.split()[0] == "server"]
        assert servers and all("check" in line for line in servers), servers
        assert all(line[-2:] == ["maxconn", "3"] for line in servers), servers
        frontend = section(config, f"frontend {name}")
        assert f"use_backend {name}_waiting if {{ nbsrv({name}) eq 0 }}" in frontend
        waiting = section(config, f"backend {name}_waiting")
        assert [line.split()[1] for line in waiting.splitlines() if line.split()[0] == "server"] == [s[1] for s in servers]
        assert "check" not in waiting


def test_a_bad_queue_timeout_or_maxconn_is_refused_naming_the_key(tmp_path):
    operator_folder(tmp_path, haproxy_queue_timeout=0)
    with pytest.raises(ValidationError, match="key 'haproxy_queue_timeout' must be between 1 and 300 seconds, got 0"):
        services(tmp_path)
    problems = []
    loadbalancer_entries({"svc": {"loadbalancer": {"svc": {"port": 80, "listen_ports": [81, 82], "check": "/",
                                                           "maxconn": "two"}}}}, {"svc": ["127.0.0.1"]}, problems)
    assert problems == ["salt/states/kolla/svc/service.yaml: loadbalancer.svc.maxconn: "
                        "expected a number of requests above 0, got 'two'"]


def test_without_haproxy_the_services_listen_on_their_port_and_swap_overlapping(tmp_path):
    operator_folder(tmp_path, enable_haproxy=False)
    found = services(tmp_path)
    assert "haproxy" not in found
    keystone = ContainerSpec.from_dict(found["keystone"]["containers"][0]["spec"], "keystone")
    assert (keystone.swap, keystone.listen) == ("overlap", {})
    assert "auth_url = http://127.0.0.1:5000" in found["glance"]["containers"][0]["files"]["glance-api.conf"]


def test_a_vip_on_the_hosts_api_address_is_refused_naming_the_key(tmp_path):
    operator_folder(tmp_path, kolla_internal_vip_address="127.0.0.1")
    with pytest.raises(ValidationError, match="globals.yml: key 'kolla_internal_vip_address' is 127.0.0.1, "
                                              "this host's API address"):
        services(tmp_path)


def test_bad_loadbalancer_entries_are_refused_naming_the_folder_and_key():
    problems = []
    definitions = {"svc": {"loadbalancer": {"svc": {"port": 80, "listen_ports": [81, 81], "check": "v1",
                                                    "weight": 3, "timeout": "an hour"},
                                            "other": {"listen_ports": [1, 2], "check": "/"}}}}
    assert loadbalancer_entries(definitions, {"svc": ["127.0.0.1"]}, problems) == {}
    where = "salt/states/kolla/svc/service.yaml: loadbalancer"
    assert f"{where}.svc.listen_ports: expected two different port numbers, got [81, 81]" in problems
    assert f"{where}.svc.check: expected a path starting with /, got 'v1'" in problems
    assert any(p.startswith(f"{where}.svc.weight: unknown key") for p in problems)
    assert f"{where}.svc.timeout: expected a haproxy time such as 30s, 1m or 6h, got 'an hour'" in problems
    assert any(p.startswith(f"{where}.other.port: required") for p in problems)


def test_a_spec_behind_haproxy_needs_a_backend_an_address_and_two_ports_only_when_blue_green():
    with pytest.raises(ValidationError) as error:
        ContainerSpec.from_dict({"name": "api", "image": "i", "swap": "blue-green",
                                 "listen": {"backend": "api", "ports": [5000]}}, "where")
    assert "where.listen.address: required" in error.value.problems
    assert "where.listen.ports: expected two different port numbers, got [5000]" in error.value.problems
    with pytest.raises(ValidationError, match=r"where.listen.ports: expected one port number \(a 'overlap' swap "
                                              r"listens on one\), got \[1, 2\]"):
        ContainerSpec.from_dict({"name": "api", "image": "i", "swap": "overlap",
                                 "listen": {"backend": "api", "address": "a", "ports": [1, 2]}}, "where")
    member = ContainerSpec.from_dict({"name": "db", "image": "i",
                                      "listen": {"backend": "db", "address": "a", "ports": [3306]}}, "where")
    assert (member.swap, member.listen["ports"]) == ("stop-first", [3306])


def lab_pillar(folder, minion, **globals_):
    """The pillar of one of three hosts a master drives (addresses as the lab's)."""
    peers = {f"host{n}": {"eth0": [f"198.18.0.1{n}"]} for n in (1, 2, 3)}
    operator_folder(folder, network_interface="eth0", enable_keepalived=True,
                    kolla_internal_vip_address="198.18.0.10", **globals_)
    return build_pillar(folder, minion_id=minion, interfaces=peers[minion], peer_interfaces=peers)["kolla"]


def test_haproxy_on_every_control_host_fronts_the_hosts_that_run_each_service(tmp_path):
    pillar = lab_pillar(tmp_path, "host2", roles={"control": ["host*"], "compute": ["host*"], "network": ["host*"],
                                                  "storage": ["host*"], "keystone": ["host1", "host3"]})
    found = {s["name"]: s for s in pillar["services"]}
    assert "keystone" not in found and {"haproxy", "keepalived"} <= set(found)
    config = found["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    keystone = section(config, "backend keystone")
    assert [line.split()[1] for line in keystone.splitlines() if line.strip().startswith("server")] == [
        "198.18.0.11:5000", "198.18.0.11:5001", "198.18.0.13:5000", "198.18.0.13:5001"]
    assert "bind 198.18.0.10:5000" in config
    keepalived = found["keepalived"]["containers"][0]
    assert "198.18.0.10/32 dev eth0" in keepalived["files"]["keepalived.conf"]
    assert "virtual_router_id 51" in keepalived["files"]["keepalived.conf"]
    spec = ContainerSpec.from_dict(keepalived["spec"], "keepalived")
    assert spec.cap_add == ("NET_ADMIN", "NET_BROADCAST", "NET_RAW") and not spec.privileged
    assert set(spec.reasons) == {"net", "NET_ADMIN", "NET_BROADCAST", "NET_RAW"}


def test_keepalived_needs_a_vip_it_can_share_and_haproxy(tmp_path):
    """keepalived's folder says both: its rules (settings.yml) refuse a loopback VIP while
    it is on and a router id outside VRRP's, its service.yaml `needs` haproxy."""
    operator_folder(tmp_path, enable_keepalived=True, keepalived_virtual_router_id=300)
    with pytest.raises(ValidationError) as error:
        services(tmp_path)
    problems = "\n".join(error.value.problems)
    assert ("key 'kolla_internal_vip_address' must be an address keepalived can share between hosts when "
            "enable_keepalived is true, got '127.0.0.10': a loopback address is each host's own") in problems
    assert "key 'keepalived_virtual_router_id' must be between 1 and 255, got 300" in problems
    operator_folder(tmp_path, enable_keepalived=True, enable_haproxy=False, kolla_internal_vip_address="198.18.0.10")
    with pytest.raises(ValidationError, match="key 'enable_keepalived' is true, but keepalived needs haproxy"):
        services(tmp_path)
    operator_folder(tmp_path, enable_keepalived=False, keepalived_virtual_router_id=300)
    with pytest.raises(ValidationError, match="keepalived_virtual_router_id"):     # checked whether on or off
        services(tmp_path)


class FakeRuntime:
    """This host's haproxy as kolla_salt.containers.balancer.Runtime offers it (what it was asked)."""

    def __init__(self, here=True):
        self.here, self.asked = here, []

    def available(self):
        return self.here

    def take_traffic(self, *args):
        self.asked.append(("take_traffic", *args))

    def drain(self, *args):
        self.asked.append(("drain", *args))


def test_a_swap_drains_its_server_in_every_hosts_haproxy_and_names_one_that_refused():
    from kolla_salt.containers.balancer import DONE, NOT_HERE, BalancerError, Balancers
    published = []

    def remote(action, backend, server, timeout):
        published.append((action, backend, server, timeout))
        return ({"host2": DONE, "host3": "haproxy has no server 198.18.0.11:5001"} if action == "take_traffic"
                else {"host2": DONE, "host3": DONE, "host4": NOT_HERE})
    local = FakeRuntime()
    balancers = Balancers(local, remote, here="host1")
    assert balancers.drain("keystone", "198.18.0.11:5000", 10) == ["host1", "host2", "host3"]
    assert published == [("drain", "keystone", "198.18.0.11:5000", 10)]
    assert local.asked == [("drain", "keystone", "198.18.0.11:5000", 10)]
    with pytest.raises(BalancerError, match="haproxy on host3: haproxy has no server"):
        balancers.take_traffic("keystone", "198.18.0.11:5001", 180)
    # keystone on a host without haproxy: only the other hosts' haproxies front it
    assert Balancers(FakeRuntime(here=False), remote).active()
    assert not Balancers(FakeRuntime(here=False), None).active()
