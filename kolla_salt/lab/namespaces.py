"""A lab of hosts on one machine (`kolla-salt lab up|down|status`).

Each host is a network namespace with its own address (lab/topology.yml, in
198.18.0.0/15, the range for network test beds), its own Docker engine (own
data root, exec root, pid file and socket, started inside the namespace and a
UTS namespace of its own, so `--network host` containers see that host's
address and name) and its own salt-minion whose id is the host's name. The
hosts' links meet on a bridge in a namespace of its own, the switch: a bridge
in the machine's namespace would be filtered by Docker's FORWARD chain. On the
switch listen the salt-master (keys accepted by `lab up`) and a registry
(Debian's docker-registry, the Distribution registry) from which the hosts pull:
`kolla-salt --lab NAME build --push` tags images for it on this machine's engine
and pushes them from the switch (`lab down` removes those tags again).

Nothing here touches the machine's own engine, its namespace or a deployment
on it: everything the lab makes is named `<lab>-...` (namespaces, links) or
lives under /var/lib/kolla-salt-lab/<lab> and /run/kolla-salt-lab/<lab>, and
`lab down` removes exactly that, ending only the processes whose pid files it
wrote. `lab up` on a machine where the lab exists starts what is missing.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .. import paths, safeyaml
from ..errors import KollaError, ValidationError
from ..roads.master import SALT_BIN

TOPOLOGY = paths.REPO / "lab" / "topology.yml"
# The provisioning the Vagrantfile's VMs run too: a master or a minion of kolla-salt.
PROVISION = paths.REPO / "scripts" / "provision-node.sh"
DATA_ROOT = Path("/var/lib/kolla-salt-lab")
RUN_ROOT = Path("/run/kolla-salt-lab")
# Commands the lab runs, and the Debian package of each (`make setup` installs them).
NEEDED = {"ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux", "dockerd": "docker.io",
          "docker-registry": "docker-registry", "skopeo": "skopeo"}
# Folders each host has its own of (a mount namespace per host): what kolla-salt
# writes on a host (rendered config, state, logs). Empty mount points are made on
# the machine where missing; the machine's own contents stay untouched.
HOST_FOLDERS = ("/etc/kolla", "/etc/kolla-salt", "/var/lib/kolla-salt", "/var/log/kolla")
# The longest Unix socket a host's salt-minion binds, below its root (its event bus,
# named after a hash of its id), and the kernel's limit on such a path: a longer lab
# name leaves every minion silent to the master.
MINION_SOCKET = "var/cache/salt/minion/.salt-unix/minion_event_0123456789_pull.ipc"
UNIX_PATH_MAX = 107


def load_topology(path=TOPOLOGY):
    return safeyaml.load(Path(path).read_text())


def run(*cmd, check=True):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise KollaError(f"lab: `{' '.join(map(str, cmd))}` failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


class Lab:
    def __init__(self, name="kslab", hosts=3, topology=None, out=print):
        self.name, self.out = name, out
        self.topology = topology or load_topology()
        if not 1 <= hosts <= len(self.topology["hosts"]):
            raise KollaError(f"lab: --hosts must be 1 to {len(self.topology['hosts'])} ({TOPOLOGY} lists them)")
        self.hosts = self.topology["hosts"][:hosts]
        self.data = DATA_ROOT / name
        self.rundir = RUN_ROOT / name
        self.switch = f"{name}-sw"
        self.prefix_len = self.topology["network"].split("/")[1]
        self.tunnel_prefix_len = self.topology["tunnel_network"].split("/")[1]
        self.external_prefix_len = self.topology["external_network"].split("/")[1]
        self.registry = f"{self.topology['switch']}:{self.topology['registry_port']}"

    # -- names ---------------------------------------------------------------------------
    def minion_root(self, host):
        """The root folder of `host`'s salt-minion (its config, keys, cache, sockets)."""
        return self.data / host["name"] / "salt"

    def netns(self, host):
        return f"{self.name}-{host['name']}"

    def engine_socket(self, host):
        return self.rundir / f"{host['name']}.sock"

    def docker_host(self, host):
        return f"unix://{self.engine_socket(host)}"

    # -- up --------------------------------------------------------------------------------
    def up(self):
        longest = max(len(str(self.minion_root(host) / MINION_SOCKET)) for host in self.hosts)
        if longest > UNIX_PATH_MAX:
            raise ValidationError([f"lab: --name '{self.name}' is {longest - UNIX_PATH_MAX} character(s) too long: "
                                   f"each host's salt-minion binds a Unix socket under {self.data} (at most "
                                   f"{UNIX_PATH_MAX} bytes to its path)"])
        missing = sorted({pkg for cmd, pkg in NEEDED.items() if not shutil.which(cmd)})
        if missing:
            raise KollaError(f"lab: missing packages: {', '.join(missing)} (`make setup` installs them)")
        started = time.monotonic()
        self.data.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.rundir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._switch()
        for index, host in enumerate(self.hosts, 1):
            self._host_link(index, host)
        self._registry()
        for host in self.hosts:
            self._engine(host)
        self._operator_folder()
        self._master()
        for host in self.hosts:
            self._minion(host)
        self._accept_keys()
        self.out(f"[lab] {self.name}: {len(self.hosts)} host(s) up in {time.monotonic() - started:.0f} s; "
                 f"master and registry on {self.topology['switch']}")
        return self.describe()

    def _namespaces(self):
        out = run("ip", "netns", "list").stdout
        return {line.split()[0] for line in out.splitlines() if line.strip()}

    def _switch(self):
        """The switch's namespace with three bridges: br0 for the hosts' eth0 (the API
        network, where the master and the registry listen), br1 for their eth1 (the
        tunnel network: Geneve between hosts, `tunnel_interface`) and br2 for their eth2
        (the provider network, `neutron_external_interface`, whose gateway the switch
        is). What a lab made before has is kept."""
        if self.switch not in self._namespaces():
            self.out(f"[lab] switch: namespace {self.switch}, bridge with {self.topology['switch']}")
            run("ip", "netns", "add", self.switch)
            run("ip", "-n", self.switch, "link", "set", "lo", "up")
        for bridge, address in (("br0", f"{self.topology['switch']}/{self.prefix_len}"), ("br1", None),
                                ("br2", f"{self.topology['external_gateway']}/{self.external_prefix_len}")):
            if run("ip", "-n", self.switch, "link", "show", bridge, check=False).returncode == 0:
                continue
            run("ip", "-n", self.switch, "link", "add", bridge, "type", "bridge")
            run("ip", "-n", self.switch, "link", "set", bridge, "up")
            if address:
                run("ip", "-n", self.switch, "addr", "add", address, "dev", bridge)

    def _host_link(self, index, host):
        ns = self.netns(host)
        if ns not in self._namespaces():
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        self._link(ns, host, "eth0", host["address"], self.prefix_len, "br0", f"{self.name}-{index}")
        self._link(ns, host, "eth1", host["tunnel_address"], self.tunnel_prefix_len, "br1", f"{self.name}-{index}t")
        self._link(ns, host, "eth2", None, None, "br2", f"{self.name}-{index}x")

    def _link(self, ns, host, name, address, prefix_len, bridge, stem):
        """The host's link `name` with `address` (or none), its other end (`stem`s) on
        the switch's `bridge`; left as it is when the host has it."""
        if run("ip", "-n", ns, "link", "show", name, check=False).returncode == 0:
            return
        self.out(f"[lab] {host['name']}: namespace {ns}, {name} {address or '(no address)'}")
        inside, outside = f"{stem}h", f"{stem}s"
        run("ip", "-n", self.switch, "link", "del", outside, check=False)   # left by a host half made
        run("ip", "link", "add", inside, "type", "veth", "peer", "name", outside)
        run("ip", "link", "set", inside, "netns", ns)
        run("ip", "link", "set", outside, "netns", self.switch)
        run("ip", "-n", ns, "link", "set", inside, "name", name)
        if address:
            run("ip", "-n", ns, "addr", "add", f"{address}/{prefix_len}", "dev", name)
        run("ip", "-n", ns, "link", "set", name, "up")
        run("ip", "-n", self.switch, "link", "set", outside, "master", bridge, "up")

    # -- daemons: each started in its own session, its pid in <run>/<what>.pid ----------------
    def _alive(self, what):
        """Its pid runs, and is ours: every daemon of the lab names a path under its data."""
        pid = self._pid(what)
        try:
            return pid is not None and str(self.data).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    def _pid(self, what):
        try:
            return int((self.rundir / f"{what}.pid").read_text())
        except (OSError, ValueError):
            return None

    def _start(self, what, cmd, env=None):
        with open(self.data / f"{what}.log", "ab") as log:   # the daemon keeps its own copy
            proc = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **(env or {})})
        (self.rundir / f"{what}.pid").write_text(str(proc.pid))
        return proc

    def _wait(self, what, ready, timeout=90):
        deadline = time.monotonic() + timeout
        while not ready():
            if not Path(f"/proc/{self._pid(what)}").exists():   # (its command line changes while it execs)
                raise KollaError(f"lab: {what} exited; see {self.data / (what + '.log')}")
            if time.monotonic() > deadline:
                raise KollaError(f"lab: {what} not ready after {timeout} s; see {self.data / (what + '.log')}")
            time.sleep(0.5)

    def _in_switch_reachable(self, address, port):
        probe = f"import socket; socket.create_connection(('{address}', {port}), 1).close()"
        return run("ip", "netns", "exec", self.switch, sys.executable, "-c", probe, check=False).returncode == 0

    def _registry(self):
        if self._alive("registry"):
            return
        self.out(f"[lab] registry: {self.registry} (storage {self.data / 'registry'})")
        config = self.data / "registry.yml"
        config.write_text(yaml.safe_dump({
            "version": 0.1, "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(self.data / "registry")}, "delete": {"enabled": True}},
            "http": {"addr": self.registry}}))
        self._start("registry", ["ip", "netns", "exec", self.switch, "docker-registry", "serve", config])
        self._wait("registry", lambda: self._in_switch_reachable(self.topology["switch"], self.topology["registry_port"]))

    def _engine(self, host):
        what = f"{host['name']}-engine"
        if self._alive(what):
            return
        self.out(f"[lab] {host['name']}: Docker engine (socket {self.engine_socket(host)})")
        root = self.data / host["name"]
        exec_root = self.rundir / host["name"]
        # nsenter and unshare exec: the pid written is dockerd's. The UTS namespace
        # gives the host (and its --network host containers) its own name; a mount
        # namespace of its own gives it its own HOST_FOLDERS (bind mounts of its
        # containers resolve there), which its minion shares.
        binds = "; ".join(f"mkdir -p {root / 'fs' / folder.strip('/')} {folder} && "
                          f"mount --bind {root / 'fs' / folder.strip('/')} {folder}" for folder in HOST_FOLDERS)
        dockerd = (f"hostname {host['name']}; {binds}; "
                   f"exec dockerd --data-root {root / 'docker'} --exec-root {exec_root} "
                   f"--pidfile {self.rundir / (host['name'] + '-dockerd.pid')} -H {self.docker_host(host)} "
                   f"--bridge=none --iptables=false --ip-masq=false --cgroup-parent=/{self.name}-{host['name']} "
                   f"--insecure-registry={self.registry}")
        self._start(what, ["nsenter", f"--net=/run/netns/{self.netns(host)}", "unshare", "--uts", "--mount",
                           "--propagation", "private", "sh", "-c", dockerd])
        import docker
        self._wait(what, lambda: _pings(docker, self.docker_host(host)))

    def _master_dir(self):
        return self.data / "master"

    def master(self):
        """The lab's salt-master (its clients run in the switch's namespace, where it listens)."""
        from ..roads.master import Master
        return Master(self._master_dir(), netns=self.switch, out=self.out)

    def salt(self, tool, *args, timeout=60):
        """A salt command against the lab's master."""
        return self.master().command(tool, *args, timeout=timeout)

    def config_dir(self):
        """The lab's operator folder (globals.yml, passwords.yml): the master's pillar."""
        return self.data / "config"

    def _operator_folder(self):
        folder = self.config_dir()
        if (folder / "globals.yml").exists():
            return
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "globals.yml").write_text(
            "# The lab's globals.yml: every host's API address is its eth0 (lab/topology.yml),\n"
            "# Geneve tunnels between hosts end on its eth1 (the tunnel network), its eth2\n"
            "# is the provider network's uplink (the switch is that network's gateway),\n"
            "# and hosts pull their images from the lab's registry, plain HTTP\n"
            "# (`kolla-salt --lab NAME build --push` puts them there). haproxy is off: for\n"
            "# the VIP set enable_haproxy and enable_keepalived to true and\n"
            "# kolla_internal_vip_address to 198.18.0.10 (a lab address no host has).\n"
            + yaml.safe_dump({"network_interface": "eth0", "tunnel_interface": "eth1",
                              "neutron_external_interface": "eth2", "docker_registry": self.registry,
                              "docker_registry_insecure": True,
                              "enable_haproxy": False}))
        run(SALT_BIN / "kolla-salt", "--config-dir", folder, "genpwd")
        self.out(f"[lab] operator folder {folder} (globals.yml, passwords.yml)")

    def _master(self):
        if self._alive("master"):
            return
        self.out(f"[lab] salt-master on {self.topology['switch']}")
        self._start("master", ["ip", "netns", "exec", self.switch, PROVISION, "master", "--id", "master",
                               "--root", self._master_dir(), "--address", self.topology["switch"],
                               "--operator-folder", self.config_dir()])
        self._wait("master", lambda: self._in_switch_reachable(self.topology["switch"], 4506))

    def _minion(self, host):
        what = f"{host['name']}-minion"
        if self._alive(what):
            return
        self.out(f"[lab] {host['name']}: salt-minion")
        # In its engine's namespaces: the host's network, name and folders.
        engine = f"/proc/{self._pid(host['name'] + '-engine')}/ns"
        self._start(what, ["nsenter", f"--net={engine}/net", f"--uts={engine}/uts", f"--mount={engine}/mnt",
                           PROVISION, "minion", "--id", host["name"], "--root", self.minion_root(host),
                           "--master", self.topology["switch"], "--grain", f"kolla_lab={self.name}",
                           "--grain", f"kolla_lab_address={host['address']}"],
                    env={"DOCKER_HOST": self.docker_host(host)})

    def _accept_keys(self):
        names = {h["name"] for h in self.hosts}
        deadline = time.monotonic() + 90
        while True:
            keys = json.loads(self.salt("salt-key", "-L", "--out=json").stdout or "{}")
            pending = names & set(keys.get("minions_pre", []))
            for name in sorted(pending):
                self.salt("salt-key", "-y", "-a", name)
                self.out(f"[lab] {name}: key accepted")
            # A ping published before a minion holds its connection to the master's
            # publisher is lost, and the master then waits its gather_job_timeout (30 s)
            # before it says so: ping once every host holds one.
            answered = self.ping() if {h["address"] for h in self.hosts} <= self._subscribed() else set()
            if names <= answered:
                return
            if time.monotonic() > deadline:
                holding = ", ".join(sorted(self._subscribed())) or "none"
                raise KollaError(f"lab: minions not answering after 90 s: {', '.join(sorted(names - answered))} "
                                 f"(holding the master's publisher: {holding}; logs: "
                                 f"{', '.join(str(log) for log in self.salt_logs())})")
            time.sleep(1)

    def salt_logs(self):
        """The minions' logs and the master's (removed with the lab's data by `down`)."""
        return [self.minion_root(h) / "salt-minion.log" for h in self.hosts] + \
            [self._master_dir() / "salt-master.log"]

    def _subscribed(self):
        """The addresses holding a connection to the master's publisher (port 4505)."""
        listing = run("ip", "netns", "exec", self.switch, "ss", "-Htn", "state", "established",
                      "( sport = :4505 )", check=False).stdout
        return {line.split()[-1].rsplit(":", 1)[0] for line in listing.splitlines()}

    def ping(self):
        """Hosts whose minion answers the master."""
        proc = self.salt("salt", "*", "test.ping", "--out=json", "--static", "-t", "5", timeout=30)
        try:
            return {k for k, v in json.loads(proc.stdout or "{}").items() if v is True}
        except json.JSONDecodeError:
            return set()

    def describe(self):
        return {"name": self.name, "switch": self.topology["switch"], "registry": self.registry,
                "master_config": str(self._master_dir()), "config_dir": str(self.config_dir()),
                "hosts": [{**h, "namespace": self.netns(h), "docker_host": self.docker_host(h)} for h in self.hosts]}

    # -- down ------------------------------------------------------------------------------
    def down(self):
        """Removes everything this lab made, and nothing else."""
        # The minions first (they would report engines going away), killed at once: a
        # SIGTERMed salt-minion took 12 s to end even in an idle lab (5 s of it Salt's
        # fixed wait for returns to its master: kolla_salt.healing.healthloop.stop_health_daemon),
        # and has nothing to save (the lab's data goes with it). Nor have the containers:
        # killed first, they do not hold up their engine's stop with graceful stops of
        # their own (haproxy's and RabbitMQ's take up to 30 s). Then the rest together.
        stopped = self._stop([f"{h['name']}-minion" for h in self.topology["hosts"]], timeout=0)
        self._kill_containers()
        stopped += self._stop(["master", "registry"] + [f"{h['name']}-engine" for h in self.topology["hosts"]])
        namespaces = sorted(ns for ns in self._namespaces() if ns.startswith(f"{self.name}-"))
        ended = self._end_processes_in(namespaces)
        if ended:
            stopped.append(f"{ended} process(es) left in its hosts (guests' qemu outlive their libvirt)")
        for ns in namespaces:
            run("ip", "netns", "del", ns)
        for folder in (self.data, self.rundir):
            shutil.rmtree(folder, ignore_errors=True)
        tags = self._untag_pushed()
        self.out(f"[lab] {self.name}: stopped {', '.join(stopped) or 'nothing'}; removed "
                 f"{len(namespaces)} namespace(s), the lab's data and {tags} image tag(s) for its registry")

    @staticmethod
    def _end_processes_in(namespaces):
        """Kills every process whose network namespace is one of `namespaces` (the lab's:
        what runs there the lab's hosts started, such as a guest's qemu, which outlives its
        libvirt container by design); returns how many."""
        def identity(path):
            found = os.stat(path)
            return found.st_dev, found.st_ino

        inside = set()
        for ns in namespaces:
            try:
                inside.add(identity(f"/run/netns/{ns}"))
            except OSError:
                continue
        ended = 0
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and identity(f"/proc/{entry}/ns/net") in inside:
                    os.kill(int(entry), signal.SIGKILL)
                    ended += 1
            except OSError:   # ended meanwhile
                continue
        return ended

    def _kill_containers(self):
        """Kills the running containers of every host's engine that answers."""
        import docker
        import docker.errors
        for host in self.topology["hosts"]:
            if not self._alive(f"{host['name']}-engine"):
                continue
            try:
                for container in docker.DockerClient(base_url=self.docker_host(host), timeout=30).containers.list():
                    container.kill()
            except docker.errors.DockerException:   # gone meanwhile, or the engine does not answer: its stop ends them
                pass

    def _untag_pushed(self):
        """Removes the tags `build --push` gave images on this machine's engine for the
        lab's registry (an image no other tag names goes with its last tag)."""
        import docker
        import docker.errors
        try:
            client = docker.from_env(timeout=30)
            tags = [t for image in client.images.list() for t in image.tags if t.startswith(self.registry + "/")]
        except docker.errors.DockerException:
            return 0    # no engine here: no tags either
        removed = 0
        for tag in tags:
            try:
                client.images.remove(tag)
                removed += 1
            except docker.errors.APIError as error:   # a container of this machine uses it: it stays
                self.out(f"[lab] kept {tag}: {error.explanation}")
        return removed

    def _stop(self, whats, timeout=30):
        """Stops the daemons `whats` together (SIGTERM to each one's session: the daemon
        and what it started; SIGKILL after `timeout`); returns those that ran."""
        signalled = {}
        for what in whats:
            pid = self._pid(what)
            if not self._alive(what):
                continue
            try:
                os.killpg(pid, signal.SIGTERM)
                signalled[what] = pid
            except ProcessLookupError:
                pass
        def wait(seconds):
            deadline = time.monotonic() + seconds
            while any(Path(f"/proc/{pid}").exists() for pid in signalled.values()) and time.monotonic() < deadline:
                time.sleep(0.2)
        wait(timeout)
        for pid in signalled.values():
            if Path(f"/proc/{pid}").exists():
                os.killpg(pid, signal.SIGKILL)
        wait(5)   # gone (init reaps them) before what comes next
        return list(signalled)


def _pings(docker, base_url):
    try:
        return docker.DockerClient(base_url=base_url, timeout=5).ping()
    except Exception:  # not up yet
        return False
