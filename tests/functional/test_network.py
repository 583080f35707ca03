"""Open vSwitch on a network and compute host (the network-operation set, before OVN
programs it): its integration bridge has the datapath this host offers (`validate`
says which), switches frames between two test hosts plugged into it, and keeps
its ports through an upgrade of both its containers; OVN then connects the hosts."""
import functools
import io
import subprocess
import time

import pytest
from conftest import IMAGES, KollaEnv, docker_verdict, plug_test_host, unplug_test_host

pytestmark = pytest.mark.functional
BRIDGE = "kstbr-int"
NEW_IMAGE = f"{IMAGES}/openvswitch:kstovs-new"   # the upgrade's
HOSTS = {"kstovs-a": "198.18.10.1", "kstovs-b": "198.18.10.2"}   # test namespaces, the test bed's range


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def ping(source, target):
    """Whether `target` answers `source` (ping exits 1 when it does not, 2 on errors)."""
    proc = sh("ip", "netns", "exec", source, "ping", "-c", "2", "-W", "2", "-i", "0.3", HOSTS[target])
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode == 0


def answers(source, target, expected=True, timeout=30):
    """Whether ping's answer becomes `expected` within `timeout` seconds (a port just
    added, or a flow just changed, takes ovs-vswitchd or OVN a moment)."""
    deadline = time.monotonic() + timeout
    while ping(source, target) != expected:
        if time.monotonic() > deadline:
            return not expected
        time.sleep(0.5)
    return expected


@pytest.fixture(scope="module")
def switch(tmp_path_factory, docker_client, built_images):
    built_images("openvswitch", "ovn")
    env = KollaEnv(tmp_path_factory.mktemp("network"), "kstovs-")
    env.cleanup(docker_client)
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_memcached=False, enable_keystone=False,
                      enable_openvswitch=True, ovs_integration_bridge=BRIDGE)
    try:   # a failed deploy too leaves nothing running
        env.deploy_output = env.run("deploy").stdout
        for host, address in HOSTS.items():   # their <host>0 ends become ports of the bridge
            plug_test_host(host, address)
        yield env
    finally:
        vswitchd = docker_client.containers.list(filters={"name": env.name("openvswitch_vswitchd")})
        if vswitchd:   # the kernel datapath keeps a bridge after ovs-vswitchd ends
            vswitchd[0].exec_run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE])
        for host in HOSTS:
            unplug_test_host(host)
        env.cleanup(docker_client)
        sh("ip", "link", "del", BRIDGE)   # the userspace datapath's bridge device outlives ovs-vswitchd too
        if docker_client.images.list(name=NEW_IMAGE):
            docker_client.images.remove(NEW_IMAGE, force=True)


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
    vswitchd = docker_client.containers.get(env.name("openvswitch_vswitchd"))
    ofctl = vswitchd.exec_run(["ovs-ofctl", "add-flow", BRIDGE, "actions=NORMAL"])   # OVN's flows, simplest form
    assert ofctl.exit_code == 0, ofctl.output.decode()
    assert answers("kstovs-a", "kstovs-b") and answers("kstovs-b", "kstovs-a")
    # fail-mode secure: without a controller's flows nothing is switched.
    assert vswitchd.exec_run(["ovs-ofctl", "del-flows", BRIDGE]).exit_code == 0
    assert not answers("kstovs-a", "kstovs-b", expected=False)
    for container in ("openvswitch_db", "openvswitch_vswitchd"):
        assert docker_client.containers.get(env.name(container)).labels["kolla.set"] == "network-operation/openvswitch"
        assert docker_verdict(docker_client.containers.get(env.name(container))) == "healthy", container
    assert not docker_client.containers.get(env.name("openvswitch_db")).attrs["HostConfig"]["CapAdd"]
    assert " 0 changed, 0 failed" in env.run("deploy").stdout


def test_an_upgrade_keeps_the_ports_and_switching(switch, docker_client):
    env = switch
    for host in HOSTS:
        vsctl(docker_client, env, "--may-exist", "add-port", BRIDGE, f"{host}0")
    ports = vsctl(docker_client, env, "list-ports", BRIDGE).split()
    # A new image (the built one plus a label: new content) replaces both containers.
    built = docker_client.containers.get(env.name("openvswitch_db")).image
    docker_client.images.build(fileobj=io.BytesIO(f"FROM {built.id}\nLABEL kolla.test=kstovs\n".encode()),
                               tag=NEW_IMAGE, rm=True)
    env.write_globals(openvswitch_tag=NEW_IMAGE.rsplit(":", 1)[1])
    out = env.run("upgrade", "--services", "openvswitch").stdout
    for container in ("openvswitch_db", "openvswitch_vswitchd"):
        assert f"{env.name(container)} recreated, generation 2 is healthy" in out, out
        assert docker_client.containers.get(env.name(container)).image.tags == [NEW_IMAGE]
    assert vsctl(docker_client, env, "list-ports", BRIDGE).split() == ports   # the database's volume kept them
    # The flows are ovs-vswitchd's, gone with it: OVN's controller programs them again.
    docker_client.containers.get(env.name("openvswitch_vswitchd")).exec_run(
        ["ovs-ofctl", "add-flow", BRIDGE, "actions=NORMAL"])
    assert answers("kstovs-a", "kstovs-b")


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
    # One chassis, named as the controller's settings in this host's Open vSwitch say (its minion id).
    assert sb("--bare", "--columns=name", "list", "Chassis") == \
        vsctl(docker_client, env, "get", "Open_vSwitch", ".", "external_ids:system-id").strip('"')
    nb("--may-exist", "ls-add", "kst-net")
    for host, ip in HOSTS.items():
        mac = sh("ip", "-n", host, "-brief", "link", "show", "eth0").stdout.split()[2]
        nb("--may-exist", "lsp-add", "kst-net", f"kst-{host}")
        nb("lsp-set-addresses", f"kst-{host}", f"{mac} {ip}")
        nb("lsp-set-port-security", f"kst-{host}", f"{mac} {ip}")
        vsctl(docker_client, env, "--may-exist", "add-port", BRIDGE, f"{host}0", "--", "set", "Interface",
              f"{host}0", f"external_ids:iface-id=kst-{host}")
    assert answers("kstovs-a", "kstovs-b") and answers("kstovs-b", "kstovs-a")
    assert sorted(sb("--bare", "--columns=logical_port", "find", "Port_Binding", "type=\"\"").split()) == \
        sorted(f"kst-{host}" for host in HOSTS)
    mac = sh("ip", "-n", "kstovs-a", "-brief", "link", "show", "eth0").stdout.split()[2]
    nb("lsp-set-port-security", "kst-kstovs-a", f"{mac} 198.18.10.99")   # not the address it uses
    assert not answers("kstovs-a", "kstovs-b", expected=False)
    for container in ("ovn_nb_db", "ovn_sb_db", "ovn_northd", "ovn_controller"):
        assert docker_verdict(docker_client.containers.get(env.name(container))) == "healthy", container
    assert " 0 changed, 0 failed" in env.run("deploy").stdout


def test_destroy_removes_the_bridge_the_switch_made_on_this_host(switch, docker_client):
    """The integration bridge is a device of this host that outlives ovs-vswitchd;
    `destroy` removes it (the container's on_destroy) before it removes the container."""
    assert sh("ip", "link", "show", BRIDGE).returncode == 0
    out = switch.run("destroy", "--yes-i-really-mean-it").stdout
    assert f"[destroy] {switch.name('openvswitch_vswitchd')}: kolla_ovs_bridges_remove {BRIDGE}" in out, out
    assert sh("ip", "link", "show", BRIDGE).returncode != 0
