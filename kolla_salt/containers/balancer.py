"""haproxy in front of the API services: its config from the services' load-balancer
entries, and its runtime API, which a blue/green swap uses to move traffic.

Every API container behind haproxy listens on one of two ports of its own
(`listen.ports`), a generation on the one the previous generation did not use.
Both ports are servers of the service's backend, named ADDRESS:PORT; the one
nothing listens on is down by haproxy's check. A swap (kolla_salt.containers.manager)
starts the new generation on the free port, waits until haproxy sees it up,
drains the old one (no new request goes to it; the ones in flight finish),
waits until it has no session, then stops it: no request is refused or cut.
A Galera member behind haproxy (one port) is drained the same way before it stops:
its `before_stop` ends its clients' idle pooled connections, which they make again
to the next member.
"""
import re
import socket
import time
from pathlib import Path

from ..errors import KollaError
from .spec import is_one_port, is_port, port_pair_problems

ADMIN_SOCKET = "admin.sock"   # in the haproxy runtime folder (settings: haproxy_runtime_directory)
# How long haproxy lets a request of an entry without its own `timeout` run (client
# and server side): also how long a drain waits for the requests in flight, since
# haproxy would have given up on any still running after it.
REQUEST_TIMEOUT = "1m"
TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, "": 1e-3}   # no unit: ms


def seconds(text):
    """Seconds of a haproxy time ("30s", "1m", "6h", "500" in ms), at least 1; ValueError
    for anything else."""
    match = re.fullmatch(r"(\d+)(us|ms|s|m|h|d|)", str(text).strip())
    if not match:
        raise ValueError(f"expected a haproxy time such as 30s, 1m or 6h, got {text!r}")
    return max(1, round(int(match[1]) * TIME_UNITS[match[2]]))


class BalancerError(KollaError):
    """haproxy's runtime API refused or did not answer."""


def server_name(address, port):
    return f"{address}:{port}"


class Runtime:
    """haproxy's runtime API on its Unix socket (`stats socket ... level admin`)."""

    def __init__(self, runtime_dir, timeout=5):
        self.path = Path(runtime_dir) / ADMIN_SOCKET
        self.timeout = timeout

    def available(self):
        return self.path.is_socket()

    def command(self, line):
        """One command, its answer as text."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(self.timeout)
                conn.connect(str(self.path))
                conn.sendall(line.encode() + b"\n")
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
        except OSError as error:
            raise BalancerError(f"haproxy runtime API at {self.path}: {error}") from None
        return b"".join(chunks).decode(errors="replace")

    def stat(self):
        """haproxy's statistics, a row per frontend, backend (svname FRONTEND, BACKEND)
        and server: {"pxname": proxy, "svname": ..., "status": ..., "act": servers up, ...}."""
        lines = self.command("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",") if lines else []
        return [dict(zip(header, line.split(","))) for line in lines[1:] if line]

    def servers(self, backend):
        """{server name: {"status": UP/DOWN/DRAIN/MAINT..., "sessions": current}} of a backend."""
        return {row["svname"]: {"status": row.get("status", ""), "sessions": int(row.get("scur") or 0)}
                for row in self.stat()
                if row.get("pxname") == backend and row.get("svname") not in ("FRONTEND", "BACKEND", None)}

    def set_state(self, backend, server, state):
        """ready, drain or maint; haproxy answers nothing when it did it."""
        line = f"set server {backend}/{server} state {state}"
        answer = self.command(line).strip()
        if answer:
            raise BalancerError(f"haproxy refused '{line}': {answer}")

    def wait(self, backend, server, done, what, timeout):
        """Polls the server's row until done(row) is true; BalancerError after timeout s."""
        deadline = time.monotonic() + timeout
        while True:
            row = self.servers(backend).get(server)
            if row is None:
                raise BalancerError(f"haproxy has no server {server} in backend {backend}")
            if done(row):
                return row
            if time.monotonic() > deadline:
                raise BalancerError(f"haproxy: {backend}/{server} not {what} within {timeout} s "
                                    f"(status {row['status']}, {row['sessions']} sessions)")
            time.sleep(0.1)

    def wait_up(self, backend, server, timeout):
        """Until haproxy's own check has found the server up (status UP, not UP 1/2)."""
        return self.wait(backend, server, lambda row: row["status"] == "UP", "up", timeout)

    def wait_drained(self, backend, server, timeout):
        """Until the server has no session."""
        return self.wait(backend, server, lambda row: row["sessions"] == 0, "drained", timeout)

    def take_traffic(self, backend, server, timeout):
        """The server gets requests: made ready, and haproxy's own check found it up.
        One not already up and ready goes through maintenance on its way: haproxy 2.6
        hands a server the requests waiting in the backend's queue (maxconn) when it
        comes up or leaves maintenance, not when it leaves drain. A new generation on
        the port a drained one left, made ready from drain while requests queued, got
        none of them, and none after them (they queue behind), until `timeout queue`:
        every request for 60 s after a keystone swap under load."""
        if self.servers(backend).get(server, {}).get("status") != "UP":
            self.set_state(backend, server, "maint")
        self.set_state(backend, server, "ready")
        self.wait_up(backend, server, timeout)

    def drain(self, backend, server, timeout=None):
        """No new session goes to the server; those it has go on (wait_drained). Of a
        `one_active` backend's server, the next server up takes the new ones."""
        self.set_state(backend, server, "drain")


# What kolla_balancer (salt/_modules) answers on a host when all went well.
DONE, NOT_HERE = "done", "no haproxy here"


class Balancers:
    """Every haproxy in front of a server: this host's (a Runtime; used when haproxy
    runs here, named `here`) and those of the other hosts, through `remote(action,
    backend, server, timeout)`, which runs the same Runtime action on each of them
    (the salt module kolla_balancer, published through the master) and returns
    {host: its answer}: DONE, NOT_HERE, or a problem. A host that does not answer
    serves nobody through its haproxy (keepalived moved the VIP away), so it holds
    no swap up. Each action returns the hosts whose haproxy did it."""

    def __init__(self, local=None, remote=None, here="this host"):
        self.local, self.remote, self.here = local, remote, here

    def active(self):
        return self.remote is not None or (self.local is not None and self.local.available())

    def _everywhere(self, action, backend, server, timeout):
        answers = self.remote(action, backend, server, timeout) if self.remote else {}
        if self.local is not None and self.local.available():
            getattr(self.local, action)(backend, server, timeout)
            answers[self.here] = DONE
        problems = {host: answer for host, answer in answers.items() if answer not in (DONE, NOT_HERE)}
        if problems:
            raise BalancerError("; ".join(f"haproxy on {host}: {problem}" for host, problem in sorted(problems.items())))
        return sorted(host for host, answer in answers.items() if answer == DONE)

    def take_traffic(self, backend, server, timeout):
        return self._everywhere("take_traffic", backend, server, timeout)

    def drain(self, backend, server, timeout):
        return self._everywhere("drain", backend, server, timeout)

    def wait_drained(self, backend, server, timeout):
        return self._everywhere("wait_drained", backend, server, timeout)


LOADBALANCER_KEYS = {"port": "the port haproxy listens on, on the VIP",
                     "listen_ports": "the two ports the service's generations listen on in turn "
                                     "(one for a service that is not swapped blue/green)",
                     "check": "the path of haproxy's HTTP check (2xx or 3xx is up)",
                     "timeout": f"optional: client and server timeout of long requests (haproxy syntax, 6h; "
                                f"{REQUEST_TIMEOUT} without); a drain waits as long for the requests in flight",
                     "drain_timeout": "optional: how long a drain waits for the server's sessions to end, when "
                                      "not `timeout` (a database's idle sessions last as long as its clients)",
                     "mode": "optional: http (the default) or tcp (a byte stream, such as the database)",
                     "check_port": "optional: the port that answers the HTTP check, when not the server's own",
                     "one_active": "optional: true sends every connection to the first server up, the others "
                                   "are backups (one writer of a Galera cluster)",
                     "maxconn": "optional: how many requests one server serves at once (its workers); haproxy "
                                "queues the others, so that neither they nor its check wait in the server's backlog",
                     "external_tls_port": "optional: with kolla_enable_tls_external, the port the external VIP "
                                          "serves it on over HTTPS when not `port`; plain HTTP on `port` there is "
                                          "redirected to it (what a browser's http:// address reaches)"}


OPTIONAL_LOADBALANCER_KEYS = ("timeout", "drain_timeout", "mode", "check_port", "one_active", "maxconn",
                              "external_tls_port")


def loadbalancer_entries(definitions, addresses, problems, tls_backend=False):
    """{backend name: entry} from the `loadbalancer:` blocks of the enabled service
    folders (docs/design.md: haproxy), what haproxy's config is made of:

        loadbalancer:
          keystone:                      # frontend and backend name
            port: 5000                   # on the VIP
            listen_ports: [5000, 5001]   # on the host's API address, one per generation
            check: /v3

    Each entry gets `name` and its `servers` (ADDRESS:PORT, kolla_salt.containers.balancer): both
    ports of every address in addresses[service] (the hosts that run it); and
    `backend_tls`: with `tls_backend` (kolla_enable_tls_backend), an HTTP entry whose
    servers are containers of the folder (their `backend:`) is called over TLS."""
    entries = {}
    for service, definition in definitions.items():
        for name, block in (definition.get("loadbalancer") or {}).items():
            where = f"salt/states/kolla/{service}/service.yaml: loadbalancer.{name}"
            if not isinstance(block, dict):
                problems.append(f"{where}: expected a mapping with {', '.join(LOADBALANCER_KEYS)}")
                continue
            found = [f"{where}.{key}: required ({meaning})" for key, meaning in LOADBALANCER_KEYS.items()
                     if key not in OPTIONAL_LOADBALANCER_KEYS and block.get(key) in (None, "")]
            found += [f"{where}.{key}: unknown key (known: {', '.join(LOADBALANCER_KEYS)})"
                      for key in block if key not in LOADBALANCER_KEYS]
            ports = block.get("listen_ports")
            if ports is not None and not is_one_port(ports):
                found += port_pair_problems(ports, f"{where}.listen_ports")
            for key in ("timeout", "drain_timeout"):
                try:
                    seconds(block.get(key, REQUEST_TIMEOUT))
                except ValueError as error:
                    found.append(f"{where}.{key}: {error}")
            if block.get("mode", "http") not in ("http", "tcp"):
                found.append(f"{where}.mode: expected http or tcp, got {block['mode']!r}")
            if "maxconn" in block and (isinstance(block["maxconn"], bool) or not isinstance(block["maxconn"], int)
                                         or block["maxconn"] < 1):
                found.append(f"{where}.maxconn: expected a number of requests above 0, got {block['maxconn']!r}")
            for key in ("check_port", "external_tls_port"):
                if key in block and not is_port(block[key]):
                    found.append(f"{where}.{key}: expected a port number, got {block[key]!r}")
            if not isinstance(block.get("one_active", False), bool):
                found.append(f"{where}.one_active: expected true or false, got {block['one_active']!r}")
            if name in entries:
                found.append(f"{where}: another service already has a loadbalancer entry '{name}'")
            if not str(block.get("check", "/")).startswith("/"):
                found.append(f"{where}.check: expected a path starting with /, got {block['check']!r}")
            problems.extend(found)
            if not found:
                timeout = block.get("timeout", REQUEST_TIMEOUT)
                entries[name] = {**block, "name": name, "timeout": timeout,
                                 "drain_timeout": block.get("drain_timeout", timeout),
                                 "mode": block.get("mode", "http"), "check_port": block.get("check_port"),
                                 "maxconn": block.get("maxconn"), "external_tls_port": block.get("external_tls_port"),
                                 "one_active": block.get("one_active", False),
                                 "backend_tls": tls_backend and block.get("mode", "http") == "http" and any(
                                     c.get("backend") == name for c in (definition.get("containers") or {}).values()),
                                 "servers": [f"{address}:{port}" for address in addresses.get(service, [])
                                             for port in ports]}
    return entries
