"""The control hosts' clusters: Galera's decisions (bootstrap, join or refuse when
deploying; which member a recovery bootstraps from), a member's my.cnf and
haproxy's entry for it; RabbitMQ's peer discovery. On one host, none of it."""
import pytest

from kolla_salt.containers.spec import ContainerSpec
from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.operations import galera
from kolla_salt.operations.galera import GaleraRefused, parse_grastate, plan, recovery_choice
from test_loadbalancer import operator_folder

HOSTS = ["host1", "host2", "host3"]


def member(data, state="down"):
    return {"data": data, "state": state, "grastate": {}}


def test_no_data_anywhere_bootstraps_on_the_first_host():
    assert plan({h: member(False) for h in HOSTS}, HOSTS) == ("host1", HOSTS)


def test_a_running_member_is_joined_and_nothing_is_bootstrapped():
    facts = {"host1": member(True), "host2": member(True, "synced"), "host3": member(False)}
    assert plan(facts, HOSTS) == (None, ["host2", "host1", "host3"])


def test_data_without_a_running_member_is_refused_naming_the_recovery_command():
    facts = {"host1": member(True), "host2": member(True, "joining"), "host3": member(False)}
    with pytest.raises(GaleraRefused) as refused:
        plan(facts, HOSTS)
    assert "host1, host2 hold data" in str(refused.value) and "kolla-salt mariadb-recovery" in str(refused.value)


def test_a_single_database_grows_into_a_cluster_from_its_own_data():
    facts = {"host1": member(False), "host2": member(True, "standalone"), "host3": member(False)}
    assert plan(facts, HOSTS) == ("host2", ["host2", "host1", "host3"])


def test_a_host_that_does_not_answer_is_refused():
    with pytest.raises(GaleraRefused, match="host3 did not say"):
        plan({"host1": member(False), "host2": member(False), "host3": "Minion did not return"}, HOSTS)


def position(seqno, uuid="6b1e7d3c-0000-0000-0000-000000000001", data=True):
    return {"data": data, "uuid": uuid, "seqno": seqno}


def test_recovery_bootstraps_from_the_highest_committed_position():
    positions = {"host1": position(41), "host2": position(57), "host3": position(-1, data=False)}
    assert recovery_choice(positions, HOSTS) == "host2"
    # a tie goes to the first host
    assert recovery_choice({h: position(7) for h in HOSTS}, HOSTS) == "host1"


def test_recovery_refuses_members_of_two_clusters_and_an_empty_cluster():
    positions = {"host1": position(3), "host2": position(9, uuid="aaaaaaaa-0000-0000-0000-000000000002"),
                 "host3": position(1)}
    with pytest.raises(GaleraRefused, match="different clusters"):
        recovery_choice(positions, HOSTS)
    with pytest.raises(GaleraRefused, match="no member holds data"):
        recovery_choice({h: position(-1, data=False) for h in HOSTS}, HOSTS)


def test_grastate_is_read_as_galera_writes_it():
    text = ("# GALERA saved state\nversion: 2.1\nuuid:    6b1e7d3c-0000-0000-0000-000000000001\n"
            "seqno:   1234\nsafe_to_bootstrap: 1\n")
    assert parse_grastate(text) == {"uuid": "6b1e7d3c-0000-0000-0000-000000000001", "seqno": 1234,
                                    "safe_to_bootstrap": True}
    assert parse_grastate("")["seqno"] == -1


def my_cnf(folder, peers):
    pillar = build_pillar(folder, minion_id="host2", interfaces={"eth0": ["198.18.0.12"]},
                          peer_interfaces={h: {"eth0": [a]} for h, a in peers.items()})
    (mariadb,) = [s for s in pillar["kolla"]["services"] if s["name"] == "mariadb"]
    return galera.member(mariadb)["files"]["my.cnf"]


def test_mariadb_on_several_hosts_is_a_galera_member_of_all_of_them_and_alone_it_is_not(tmp_path):
    operator_folder(tmp_path, network_interface="eth0", enable_haproxy=False,
                    roles={"control": ["host*"], "compute": ["host*"]})
    config = my_cnf(tmp_path, {"host1": "198.18.0.11", "host2": "198.18.0.12", "host3": "198.18.0.13"})
    assert "wsrep_on = ON" in config
    assert "wsrep_cluster_address = gcomm://198.18.0.11:4567,198.18.0.12:4567,198.18.0.13:4567" in config
    assert "wsrep_node_address = 198.18.0.12:4567" in config and "wsrep_sst_receive_address = 198.18.0.12:4444" in config
    assert "wsrep" not in my_cnf(tmp_path, {"host2": "198.18.0.12"})


def test_a_cluster_behind_haproxy_is_reached_on_the_vip_with_one_writer_checked_by_clustercheck(tmp_path):
    operator_folder(tmp_path, network_interface="eth0", enable_haproxy=True, enable_keepalived=True,
                    kolla_internal_vip_address="198.18.0.10", roles={"control": ["host*"], "compute": ["host*"]})
    pillar = build_pillar(tmp_path, minion_id="host2", interfaces={"eth0": ["198.18.0.12"]},
                          peer_interfaces={f"host{i}": {"eth0": [f"198.18.0.1{i}"]} for i in (1, 2, 3)})
    found = {s["name"]: s for s in pillar["kolla"]["services"]}
    config = found["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    listen = config.split("\nlisten mariadb\n")[1].split("\nfrontend")[0]
    assert "mode tcp" in listen and "bind 198.18.0.10:3306" in listen and "timeout server 1h" in listen
    servers = [line.split() for line in listen.splitlines() if line.strip().startswith("server ")]
    assert [s[1] for s in servers] == ["198.18.0.11:3306", "198.18.0.12:3306", "198.18.0.13:3306"]
    assert ["backup" in s for s in servers] == [False, True, True]     # one writer
    assert all("4569" in s and "shutdown-sessions" in s for s in servers)
    assert "@198.18.0.10:3306/keystone" in found["keystone"]["containers"][0]["files"]["keystone.conf"]
    # The clustercheck first: a new member is taken into haproxy's traffic once it finds it up.
    assert [c["spec"]["name"] for c in found["mariadb"]["containers"]] == ["t-mariadb_clustercheck", "t-mariadb"]
    # A member is drained in every haproxy before it stops (not swapped blue/green: one
    # port); its idle service connections are ended, the busy ones are made again
    # within connection_recycle_time, and the drain waits 30 s at most.
    spec = ContainerSpec.from_dict(galera.member(found["mariadb"])["spec"], "mariadb")
    assert spec.swap == "stop-first"
    assert spec.listen == {"backend": "mariadb", "address": "198.18.0.12", "ports": [3306], "drain_timeout": 30}
    assert spec.before_stop == ("kolla_mariadb_leave", "198.18.0.12", "3306", "25")
    assert "connection_recycle_time = 10\n" in found["keystone"]["containers"][0]["files"]["keystone.conf"]
    # The all-in-one: one server on the host's own address, no clustercheck, no listen in haproxy.
    operator_folder(tmp_path)
    alone = {s["name"]: s for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]}
    assert "@127.0.0.1:3306/keystone" in alone["keystone"]["containers"][0]["files"]["keystone.conf"]
    assert len(alone["mariadb"]["containers"]) == 1
    alone_member = ContainerSpec.from_dict(galera.member(alone["mariadb"])["spec"], "mariadb")
    assert (alone_member.listen, alone_member.before_stop) == ({}, ())
    assert "listen mariadb" not in alone["haproxy"]["containers"][0]["files"]["haproxy.cfg"]


def test_rabbitmq_on_several_hosts_lists_every_node_for_peer_discovery_and_alone_none(tmp_path):
    operator_folder(tmp_path, network_interface="eth0", enable_haproxy=False,
                    roles={"control": ["host*"], "compute": ["host*"]})

    def rabbitmq_conf(peers):
        pillar = build_pillar(tmp_path, minion_id="host2", interfaces={"eth0": ["198.18.0.12"]},
                              peer_interfaces={h: {"eth0": [a]} for h, a in peers.items()})
        (rabbitmq,) = [s for s in pillar["kolla"]["services"] if s["name"] == "rabbitmq"]
        return rabbitmq["containers"][0]["files"]["rabbitmq.conf"]
    config = rabbitmq_conf({"host1": "198.18.0.11", "host2": "198.18.0.12", "host3": "198.18.0.13"})
    assert "cluster_formation.peer_discovery_backend = classic_config" in config
    assert [line.split(" = ")[1] for line in config.splitlines() if ".classic_config.nodes." in line] == [
        "rabbit@198.18.0.11", "rabbit@198.18.0.12", "rabbit@198.18.0.13"]
    assert "cluster_formation" not in rabbitmq_conf({"host2": "198.18.0.12"})


def test_nova_reaches_every_rabbitmq_node_and_uses_quorum_queues(tmp_path):
    operator_folder(tmp_path, network_interface="eth0", enable_haproxy=False, enable_nova=True,
                    roles={"control": ["host*"], "compute": ["host*"]})
    pillar = build_pillar(tmp_path, minion_id="host2", interfaces={"eth0": ["198.18.0.12"]},
                          peer_interfaces={f"host{i}": {"eth0": [f"198.18.0.1{i}"]} for i in (1, 2, 3)})
    (nova,) = [s for s in pillar["kolla"]["services"] if s["name"] == "nova"]
    config = nova["containers"][0]["files"]["nova.conf"]
    (url,) = [line.split(" = ")[1] for line in config.splitlines() if line.startswith("transport_url")]
    assert url == "rabbit://" + ",".join(f"openstack:pw-rabbitmq_password@198.18.0.1{i}:5672" for i in (1, 2, 3)) + "//"
    assert "[oslo_messaging_rabbit]\nrabbit_quorum_queue = true" in config


def test_ovn_databases_on_several_hosts_are_raft_clusters_the_lowest_address_founds_and_alone_standalone(tmp_path):
    operator_folder(tmp_path, network_interface="eth0", enable_haproxy=False, enable_ovn=True, enable_openvswitch=True,
                    roles={"control": ["host*"], "compute": ["host*"]})
    three = {f"host{i}": f"198.18.0.1{i}" for i in (1, 2, 3)}

    def ovn(minion, peers):
        """{container: (its spec, its one rendered file)} of the ovn service on `minion`."""
        pillar = build_pillar(tmp_path, minion_id=minion, interfaces={"eth0": [peers[minion]]},
                              peer_interfaces={h: {"eth0": [a]} for h, a in peers.items()})
        (found,) = [s for s in pillar["kolla"]["services"] if s["name"] == "ovn"]
        return {c["spec"]["name"]: (ContainerSpec.from_dict(c["spec"], c["spec"]["name"]), c["files"]["ovn.env"])
                for c in found["containers"]}
    first, second = ovn("host1", three), ovn("host2", three)
    for name, raft, client in (("t-ovn_nb_db", 6643, 6641), ("t-ovn_sb_db", 6644, 6642)):
        spec, env = second[name]
        assert f"OVN_DB_RAFT=tcp:198.18.0.12:{raft}\nOVN_DB_FIRST=no\n" in env
        assert f'OVN_DB_REMOTES="tcp:198.18.0.11:{raft} tcp:198.18.0.13:{raft} "' in env
        assert f'OVN_DB_PEERS="tcp:198.18.0.11:{client} tcp:198.18.0.13:{client} "' in env
        assert "OVN_DB_FIRST=yes" in first[name][1]
        assert "cluster/status" in " ".join(spec.healthcheck.test)
        assert spec.cluster == name          # the health loop restarts one member at a time
    assert "OVN_NB_DB=tcp:198.18.0.11:6641,tcp:198.18.0.12:6641,tcp:198.18.0.13:6641\n" in second["t-ovn_northd"][1]
    alone = ovn("host2", {"host2": "198.18.0.12"})
    assert "OVN_DB_RAFT" not in alone["t-ovn_nb_db"][1] and "OVN_NB_DB=tcp:198.18.0.12:6641\n" in alone["t-ovn_northd"][1]
