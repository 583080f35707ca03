"""kolla_salt.operations.runonce's decisions, against a stand-in for the openstack client (the
real one runs in tests/functional/test_cloud.py)."""
import json

from kolla_salt.operations.runonce import init_runonce, names

OPEN = [{"IP Protocol": "icmp", "Port Range": "", "Ethertype": "IPv4"},
        {"IP Protocol": "tcp", "Port Range": "22:22", "Ethertype": "IPv4"}]
# What init-runonce adds to the default security group when it lacks both.
RULES = [("security", "group", "rule", "create", "--ingress", "--protocol", "icmp", "group-id"),
         ("security", "group", "rule", "create", "--ingress", "--protocol", "tcp", "--dst-port", "22", "group-id")]


class Cloud:
    """Answers `list` commands from `there` ({kind: names}), the default security
    group's ingress rules from `rules`, and records the rest."""

    def __init__(self, there, router_ports="", rules=()):
        self.there, self.router_ports, self.rules, self.done = there, router_ports, list(rules), []

    def __call__(self, *args, values=True):
        if args[:2] == ("token", "issue"):
            return "project-id\n"
        if args[:3] == ("security", "group", "list"):
            return "other-id web\ngroup-id default\n"
        if args[:4] == ("security", "group", "rule", "list"):
            return json.dumps(self.rules)
        if args[1] == "list":
            if args[0] == "port":
                return self.router_ports
            if args[0] == "image" and "--name" in args:
                return ""
            return "\n".join(self.there.get(args[0], ()))
        self.done.append(args)
        return "an-id\n"


class NoDocker:
    """A Docker client that cannot be used: with the guest's images in glance already,
    nothing is copied out of Docker."""
    containers = None


def test_a_cloud_with_everything_gets_nothing_new_and_the_line_names_it():
    made = names("demo-")
    cloud = Cloud({"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                   "subnet": [made["servers"]], "router": [made["router"]], "keypair": [made["key"]]},
                  router_ports="a-port\n", rules=OPEN)
    said = []
    line = init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", out=said.append)
    assert cloud.done == []
    assert len([s for s in said if s.endswith(": there already")]) == 8
    assert line == ("server", "create", "--image", "demo-guest", "--flavor", "demo-small", "--network", "demo-servers",
                    "--key-name", "demo-key", "--wait", "demo-server1")


def test_a_router_left_without_its_subnet_by_a_run_killed_half_way_gets_it(tmp_path):
    made = names("kst-")
    cloud = Cloud({"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                   "subnet": [made["servers"]], "router": [made["router"]]})
    init_runonce(cloud, NoDocker(), "guest:tag", "kst-", "198.18.21.0/24", public_key="ssh-ed25519 AAAA k",
                 out=lambda message: None)
    assert cloud.done[0] == ("router", "add", "subnet", "kst-router", "kst-servers")
    assert cloud.done[1:3] == RULES
    kind, action, option, _, name = cloud.done[3]
    assert (kind, action, option, name) == ("keypair", "create", "--public-key", "kst-key")


def test_a_new_keypairs_private_key_is_kept_0600_and_never_said(tmp_path):
    made = names("demo-")
    cloud = Cloud({"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                   "subnet": [made["servers"]], "router": [made["router"]]}, router_ports="a-port\n")
    key = tmp_path / "demo-key.pem"
    said = []
    init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", key_file=key, out=said.append)
    assert cloud.done == RULES + [("keypair", "create", "demo-key")]
    assert key.read_text() == "an-id\n" and key.stat().st_mode & 0o777 == 0o600
    assert not any("an-id" in s for s in said)


def test_ping_and_ssh_are_let_in_by_the_default_group_once():
    """The project's default security group gets what it lacks of ping and SSH in
    (a rule for every port, or all protocols of a port range, counts as there)."""
    made = names("demo-")
    everything = {"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                  "subnet": [made["servers"]], "router": [made["router"]], "keypair": [made["key"]]}
    cloud = Cloud(everything, router_ports="a-port\n", rules=OPEN[1:])
    said = []
    init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", out=said.append)
    assert cloud.done == RULES[:1]
    assert "[init-runonce] security group rule default: ping in: created" in said
    assert "[init-runonce] security group rule default: SSH in: there already" in said
    cloud = Cloud(everything, router_ports="a-port\n", rules=[{**OPEN[1], "Port Range": ""}, OPEN[0]])
    init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", out=lambda message: None)
    assert cloud.done == []
