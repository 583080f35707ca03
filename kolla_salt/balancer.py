"""haproxy in front of the API services: its config from the services' load-balancer
entries, and its runtime API, which a blue/green swap uses to move traffic.

Every API container behind haproxy listens on one of two ports of its own
(`listen.ports`), a generation on the one the previous generation did not use.
Both ports are servers of the service's backend, named ADDRESS:PORT; the one
nothing listens on is down by haproxy's check. A swap (kolla_salt.containers)
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

from .errors import KollaError

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
