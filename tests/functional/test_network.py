"""Open vSwitch on a network and compute host (the network-operation set, before OVN
programs it): its integration bridge has the datapath this host offers (`validate`
says which), switches frames between two test hosts plugged into it, and keeps
its ports and switching through an upgrade of both its containers."""
import functools
import subprocess
import time

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


def test_ovn_connects_the_test_hosts_through_a_logical_switch_with_port_security(switch, docker_client):
    """OVN's databases, northd and this chassis' controller added to the deploy: the
    chassis registers, and a logical switch with one port per test host (bound where
    the host's interface names it, as nova's VIF plugging will) connects them with
    OVN's flows alone (the controller replaces the bridge's flows). A port whose
    port security allows another address drops what its host sends."""
    env = switch
    env.write_globals(enable_ovn=True, enable_ovn_controller=True)
    out = env.run("deploy").stdout
    assert f"{env.name('ovn_controller')} created, generation 1 is healthy" in out, out
    northd = docker_client.containers.get(env.name("ovn_northd"))
    address = "127.0.0.1"   # the tests' API address (loopback)

    def ctl(tool, port, *args):
        result = northd.exec_run([tool, f"--db=tcp:{address}:{port}", *args])
        assert result.exit_code == 0, (args, result.output.decode())
        return result.output.decode().strip()

    nb = functools.partial(ctl, "ovn-nbctl", env.globals["ovn_nb_db_port"])
    sb = functools.partial(ctl, "ovn-sbctl", env.globals["ovn_sb_db_port"])
    assert sb("--bare", "--columns=name", "list", "Chassis") == "local"   # the minion id: salt-call --local
    nb("--may-exist", "ls-add", "kst-net")
    for host, ip in HOSTS.items():
        mac = sh("ip", "-n", host, "-brief", "link", "show", "eth0").stdout.split()[2]
        nb("--may-exist", "lsp-add", "kst-net", f"kst-{host}")
        nb("lsp-set-addresses", f"kst-{host}", f"{mac} {ip}")
        nb("lsp-set-port-security", f"kst-{host}", f"{mac} {ip}")
        vsctl(docker_client, env, "--may-exist", "add-port", BRIDGE, f"{host}0", "--", "set", "Interface",
              f"{host}0", f"external_ids:iface-id=kst-{host}")
    deadline = time.monotonic() + 30
    while not ping("kstovs-a", "kstovs-b") and time.monotonic() < deadline:
        time.sleep(1)
    assert ping("kstovs-a", "kstovs-b") and ping("kstovs-b", "kstovs-a")
    assert sb("--bare", "--columns=logical_port", "find", "Port_Binding", "type=\"\"").split() == \
        sorted(f"kst-{host}" for host in HOSTS)
    mac = sh("ip", "-n", "kstovs-a", "-brief", "link", "show", "eth0").stdout.split()[2]
    nb("lsp-set-port-security", "kst-kstovs-a", f"{mac} 198.18.10.99")   # not the address it uses
    deadline = time.monotonic() + 30
    while ping("kstovs-a", "kstovs-b") and time.monotonic() < deadline:
        time.sleep(1)
    assert not ping("kstovs-a", "kstovs-b")
    for container in ("ovn_nb_db", "ovn_sb_db", "ovn_northd", "ovn_controller"):
        assert docker_client.containers.get(env.name(container)).health == "healthy", container
    assert " 0 changed, 0 failed" in env.run("deploy").stdout
