"""Open vSwitch on a network and compute host (the network-operation set, before OVN
programs it): its integration bridge has the datapath this host offers (`validate`
says which), switches frames between two test hosts plugged into it, and keeps
its ports and switching through an upgrade of both its containers."""
import subprocess

import pytest
from conftest import KollaEnv

pytestmark = pytest.mark.functional
RELEASE, NEXT = "2026.1", "2026.2"
BRIDGE = "kstbr-int"
HOSTS = {"kstovs-a": "198.18.10.1", "kstovs-b": "198.18.10.2"}   # test namespaces, the test bed's range


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def ping(source, target):
    return sh("ip", "netns", "exec", source, "ping", "-c", "2", "-W", "2", "-i", "0.3", HOSTS[target]).returncode == 0


@pytest.fixture(scope="module")
def switch(tmp_path_factory, docker_client, built_images):
    for release in (RELEASE, NEXT):
        built_images("--release", release, "openvswitch")
    env = KollaEnv(tmp_path_factory.mktemp("network"), "kstovs-")
    env.cleanup(docker_client)
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_memcached=False, enable_keystone=False,
                      enable_openvswitch=True, ovs_integration_bridge=BRIDGE, openstack_release=RELEASE)
    env.deploy_output = env.run("deploy").stdout
    for host, address in HOSTS.items():   # a test host: a namespace whose eth0 is a port of the bridge
        sh("ip", "netns", "del", host)
        for step in (["ip", "netns", "add", host],
                     ["ip", "link", "add", f"{host}0", "type", "veth", "peer", "name", "eth0", "netns", host],
                     ["ip", "link", "set", f"{host}0", "up"],
                     ["ip", "-n", host, "addr", "add", f"{address}/24", "dev", "eth0"],
                     ["ip", "-n", host, "link", "set", "eth0", "up"]):
            proc = sh(*step)
            assert proc.returncode == 0, (step, proc.stderr)
    yield env
    vswitchd = docker_client.containers.list(filters={"name": env.name("openvswitch_vswitchd")})
    if vswitchd:   # the kernel datapath keeps a bridge after ovs-vswitchd ends
        vswitchd[0].exec_run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE])
    for host in HOSTS:
        sh("ip", "netns", "del", host)   # takes both ends of its veth pair
    env.cleanup(docker_client)


def vsctl(docker_client, env, *args):
    result = docker_client.containers.get(env.name("openvswitch_vswitchd")).exec_run(["ovs-vsctl", *args])
    assert result.exit_code == 0, result.output.decode()
    return result.output.decode().strip()


def test_the_bridge_has_the_hosts_datapath_and_switches_between_its_ports(switch, docker_client):
    env = switch
    datapath = env.run("validate").stdout.split("Open vSwitch forwards with the ")[1].split()[0]
    assert datapath in ("system", "netdev")
    assert vsctl(docker_client, env, "get", "Bridge", BRIDGE, "datapath_type") == datapath
    assert vsctl(docker_client, env, "get", "Bridge", BRIDGE, "fail_mode") == "secure"
    for host in HOSTS:
        vsctl(docker_client, env, "--may-exist", "add-port", BRIDGE, f"{host}0")
    assert not ping("kstovs-a", "kstovs-b")   # fail-mode secure: nothing is switched until a controller says so
    ofctl = docker_client.containers.get(env.name("openvswitch_vswitchd")).exec_run(
        ["ovs-ofctl", "add-flow", BRIDGE, "actions=NORMAL"])   # what OVN's controller will program, simplest form
    assert ofctl.exit_code == 0, ofctl.output.decode()
    assert ping("kstovs-a", "kstovs-b") and ping("kstovs-b", "kstovs-a")
    for container in ("openvswitch_db", "openvswitch_vswitchd"):
        running = docker_client.containers.get(env.name(container))
        assert running.labels["kolla.set"] == "network-operation/openvswitch"
        assert running.health == "healthy"
    assert not docker_client.containers.get(env.name("openvswitch_db")).attrs["HostConfig"]["CapAdd"]
    assert " 0 changed, 0 failed" in env.run("deploy").stdout


def test_an_upgrade_keeps_the_ports_and_switching(switch, docker_client):
    env = switch
    for host in HOSTS:
        vsctl(docker_client, env, "--may-exist", "add-port", BRIDGE, f"{host}0")
    ports = vsctl(docker_client, env, "list-ports", BRIDGE).split()
    out = env.run("upgrade", "--set", "network-operation", "--release", NEXT).stdout
    for container in ("openvswitch_db", "openvswitch_vswitchd"):
        assert f"{env.name(container)} recreated, generation 2 is healthy" in out, out
        assert docker_client.containers.get(env.name(container)).image.labels["kolla.release"] == NEXT
    assert vsctl(docker_client, env, "list-ports", BRIDGE).split() == ports   # the database's volume kept them
    # The flows are ovs-vswitchd's, gone with it: OVN's controller programs them again.
    docker_client.containers.get(env.name("openvswitch_vswitchd")).exec_run(
        ["ovs-ofctl", "add-flow", BRIDGE, "actions=NORMAL"])
    assert ping("kstovs-a", "kstovs-b")
