"""kolla_salt.runonce's decisions, against a stand-in for the openstack client (the
real one runs in tests/functional/test_cloud.py)."""
from kolla_salt.runonce import init_runonce, names


class Cloud:
    """Answers `list` commands from `there` ({kind: names}) and records the rest."""

    def __init__(self, there, router_ports=""):
        self.there, self.router_ports, self.done = there, router_ports, []

    def __call__(self, *args, values=True):
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
                  router_ports="a-port\n")
    said = []
    line = init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", out=said.append)
    assert cloud.done == []
    assert len([s for s in said if s.endswith(": there already")]) == 6
    assert line == ("server", "create", "--image", "demo-guest", "--flavor", "demo-small", "--network", "demo-servers",
                    "--key-name", "demo-key", "--wait", "demo-server1")


def test_a_router_left_without_its_subnet_by_a_run_killed_half_way_gets_it(tmp_path):
    made = names("kst-")
    cloud = Cloud({"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                   "subnet": [made["servers"]], "router": [made["router"]]})
    init_runonce(cloud, NoDocker(), "guest:tag", "kst-", "198.18.21.0/24", public_key="ssh-ed25519 AAAA k",
                 out=lambda message: None)
    assert cloud.done[0] == ("router", "add", "subnet", "kst-router", "kst-servers")
    kind, action, option, _, name = cloud.done[1]
    assert (kind, action, option, name) == ("keypair", "create", "--public-key", "kst-key")


def test_a_new_keypairs_private_key_is_kept_0600_and_never_said(tmp_path):
    made = names("demo-")
    cloud = Cloud({"image": [made["guest"]], "flavor": [made["small"]], "network": [made["servers"]],
                   "subnet": [made["servers"]], "router": [made["router"]]}, router_ports="a-port\n")
    key = tmp_path / "demo-key.pem"
    said = []
    init_runonce(cloud, NoDocker(), "guest:tag", "demo-", "10.0.0.0/24", key_file=key, out=said.append)
    assert cloud.done == [("keypair", "create", "demo-key")]
    assert key.read_text() == "an-id\n" and key.stat().st_mode & 0o777 == 0o600
    assert not any("an-id" in s for s in said)
