"""Clients that ask a service at a steady pace and count what failed: the
zero-failure tests and the outage benchmarks (benchmarks/common.py) use them.

Run as a script, it is such a client in a lab host's namespace (see main):
    ip netns exec NS python tests/probes.py --address 198.18.0.10 --every 0.05"""
import argparse
import contextlib
import http.client
import json
import math
import os
import sys
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request


class Prober(threading.Thread):
    """Calls `probe()` every `every` s (at most `limit` times) until stopped; keeps
    the times of its answers, counts the calls that failed or raised, and keeps what
    the first few failures were (when, how long the call took, why)."""

    def __init__(self, probe, every, limit=None):
        super().__init__(daemon=True)
        self.probe, self.every, self.limit = probe, every, limit
        self.answers, self.failed, self.calls, self.stop_flag = [], 0, 0, threading.Event()
        self.latencies, self.failures = [], []   # how long each answered call took
        self.began = self.ended = None   # when it started and stopped asking

    def run(self):
        self.began = time.monotonic()
        while not self.stop_flag.is_set() and (self.limit is None or self.calls < self.limit):
            self.calls += 1
            began = time.monotonic()
            try:
                ok, why = self.probe(), "a wrong answer"
            except Exception as error:   # any failure to get an answer is a failed call (http.client's too)
                ok, why = False, repr(error)[:200]
            if ok:
                self.answers.append(time.monotonic())
                self.latencies.append(self.answers[-1] - began)
            else:
                self.failed += 1
                if len(self.failures) < 5:
                    self.failures.append({"at": began, "took": round(time.monotonic() - began, 2), "why": why})
            self.stop_flag.wait(max(0.0, self.every - (time.monotonic() - began)))
        self.ended = time.monotonic()

    def stop(self):
        self.stop_flag.set()
        self.join()

    def longest_gap(self, start=None, end=None):
        """The longest time without an answer within [start, end], by default from when
        it started asking to when it stopped: failures before its first answer or after
        its last one count too."""
        start = self.began if start is None else start
        end = self.ended if end is None else end
        inside = [t for t in self.answers if (start is None or t > start) and (end is None or t < end)]
        times = ([start] if start is not None else []) + inside + ([end] if end is not None else [])
        return max((b - a for a, b in zip(times, times[1:])), default=math.inf)


FREEZE = ("import os, signal, sys\n"
          "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
          "    if int(pid) in (1, os.getpid()): continue\n"
          "    try: cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
          "    except OSError: continue\n"
          "    if sys.argv[1].encode() in cmd: os.kill(int(pid), signal.SIGSTOP)\n")


def freeze_service(container, process="memcached"):
    """SIGSTOP the service inside (PID 1, tini, and the check keep working):
    the process is alive, the check fails, Docker does nothing."""
    result = container.exec_run(["python3", "-c", FREEZE, process])
    assert result.exit_code == 0, result.output


def memcached_answers(port, timeout=1.0):
    """Whether memcached on loopback `port` answers `version`."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(b"version\r\n")
        return conn.recv(100).startswith(b"VERSION")


def keystone_answers(port, timeout=1.0, address="127.0.0.1"):
    """Whether keystone on loopback `port` serves its version document."""
    return urllib.request.urlopen(f"http://{address}:{port}/v3", timeout=timeout).status == 200


def answers_plain_http(address, port, timeout=5):
    """Whether a server at address:port answers a plain HTTP request (one that speaks
    only TLS does not)."""
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, http.client.HTTPException):
        return False


def trusting(cafile):
    """A TLS client context that trusts the CA whose certificate is in `cafile`."""
    return ssl.create_default_context(cafile=cafile)


def token_issue(port, password, address="127.0.0.1", user="admin", project=None, timeout=5, tls=None):
    """Asks keystone for a token for `user` (default domain; scoped to `project` when
    given); its answer (status 201, the token in X-Subject-Token). `tls`: an
    ssl.SSLContext, to ask over HTTPS."""
    auth = {"identity": {"methods": ["password"], "password": {"user": {
        "name": user, "domain": {"id": "default"}, "password": password}}}}
    if project:
        auth["scope"] = {"project": {"name": project, "domain": {"id": "default"}}}
    request = urllib.request.Request(f"{'https' if tls else 'http'}://{address}:{port}/v3/auth/tokens",
                                     json.dumps({"auth": auth}).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout, context=tls)


def token_valid(port, password, token, address="127.0.0.1", timeout=5):
    """Whether keystone at address:port says `token` is valid (asked with an admin
    token it issues): keystones on several hosts read each other's tokens."""
    with token_issue(port, password, address, project="admin", timeout=timeout) as answer:
        admin = answer.headers["X-Subject-Token"]
    request = urllib.request.Request(f"http://{address}:{port}/v3/auth/tokens",
                                     headers={"X-Auth-Token": admin, "X-Subject-Token": token})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status == 200
    except urllib.error.HTTPError:
        return False


def token_request(port, password, address="127.0.0.1", user="admin", timeout=5, tls=None):
    """A probe: whether keystone issues `user` (of the default domain) a token."""
    def probe():
        with token_issue(port, password, address, user, timeout=timeout, tls=tls) as answer:
            return answer.status == 201
    return probe


def projects_listed(port, token, address="127.0.0.1"):
    """A probe: whether keystone lists projects for `token`."""
    def probe():
        request = urllib.request.Request(f"http://{address}:{port}/v3/projects", headers={"X-Auth-Token": token})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status == 200 and "projects" in json.load(answer)
    return probe


def api_probes(port, password, address, lists):
    """{API name: probe} for a user's load through the VIP: `keystone` issues a token
    scoped to the admin project (what every `openstack` command starts with), and one
    probe per catalog type of `lists` ({type: path}: the folders' `lists`,
    kolla_salt.declaration.roles.client_lists) lists that API's resources with the
    admin's token, at the public endpoint keystone's catalog gives (the services'
    `register:` blocks)."""
    with token_issue(port, password, address, project="admin", timeout=30) as answer:
        token, catalog = answer.headers["X-Subject-Token"], json.load(answer)["token"]["catalog"]

    def token_probe():
        with token_issue(port, password, address, project="admin", timeout=60) as answer:
            return answer.status == 201

    def lister(url):
        def probe():
            request = urllib.request.Request(url, headers={"X-Auth-Token": token})
            with urllib.request.urlopen(request, timeout=60) as answer:
                answer.read()
                return answer.status == 200
        return probe

    probes = {"keystone": token_probe}
    for entry in catalog:
        if entry["type"] in lists:
            url = next(e["url"] for e in entry["endpoints"] if e["interface"] == "public").rstrip("/")
            probes[entry["name"]] = lister(url + lists[entry["type"]])
    return probes


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else math.nan


def run_load(probes, users, seconds):
    """`users` users spread over the probes (the first ones get one more when they do
    not divide), each asking again as soon as it has its answer (a closed loop: more
    users than the APIs serve at once queue, they are not dropped), for `seconds` (at
    most 100 calls a second per user). {name: figures} per probe: see `load`."""
    with load(probes, users, most_seconds=seconds) as figures:
        time.sleep(seconds)
    return figures


@contextlib.contextmanager
def load(probes, users, every=0.01, most_seconds=1800):
    """The load of `users` users spread over the probes while the block runs, each
    asking every `every` s (or as soon as it has its answer, when that takes longer),
    at most `most_seconds` long. Yields {name: figures}, filled when the block ends:
    users, sent, failed, answers per second, p50 and p99 latency (s), the first
    failures."""
    share, extra = divmod(users, len(probes))
    probers = {name: [Prober(probe, every, limit=int(most_seconds / every) + 1) for _ in range(share + (i < extra))]
               for i, (name, probe) in enumerate(probes.items())}
    everyone = [prober for group in probers.values() for prober in group]
    for prober in everyone:
        prober.start()
    began = time.monotonic()
    figures = {}
    try:
        yield figures
    finally:
        for prober in everyone:
            prober.stop_flag.set()
        for prober in everyone:
            prober.join()
    lasted = time.monotonic() - began
    for name, group in probers.items():
        latencies = [t for prober in group for t in prober.latencies]
        figures[name] = {"users": len(group), "sent": sum(p.calls for p in group),
                         "failed": sum(p.failed for p in group),
                         "rate": round(len(latencies) / lasted, 1),
                         "p50": round(percentile(latencies, 0.5), 3), "p99": round(percentile(latencies, 0.99), 3),
                         "failures": [f for p in group for f in p.failures][:3]}


def capacity(step, first, most, growth=1.10):
    """The users double from `first` (up to `most`) while `step(users)`, the answers per
    second with that many users, grows by `growth` at least: (the most answers per
    second, the users that gave them)."""
    best, best_users, users = 0.0, first, first
    while users <= most:
        total = step(users)
        if total < best * growth:
            break
        best, best_users, users = max(best, total), users, users * 2
    return best, best_users


class BackendWatch(threading.Thread):
    """Reads haproxy's statistics (its runtime API in `runtime_dir`) every `every` s
    until stopped: for each of `backends` (by default every backend but the `_waiting`
    ones), the fewest servers it had up (`fewest`) and how many times haproxy's check
    marked one of its servers down (`marked_down`)."""

    def __init__(self, runtime_dir, backends=None, every=0.25):
        from kolla_salt.containers.balancer import Runtime
        super().__init__(daemon=True)
        self.runtime, self.every = Runtime(runtime_dir), every
        self.backends = list(backends or {row["pxname"] for row in self.runtime.stat()
                                          if row["svname"] == "BACKEND" and not row["pxname"].endswith("_waiting")})
        self.fewest, self.stop_flag = {}, threading.Event()
        self.marked_down = dict.fromkeys(self.backends, 0)
        self.start_counts = self._down_counts()

    def _down_counts(self):
        return {(row["pxname"], row["svname"]): int(row.get("chkdown") or 0) for row in self.runtime.stat()
                if row["pxname"] in self.backends and row["svname"] not in ("FRONTEND", "BACKEND")}

    def run(self):
        while not self.stop_flag.is_set():
            for row in self.runtime.stat():
                if row["pxname"] in self.backends and row["svname"] == "BACKEND":
                    up = int(row.get("act") or 0)
                    self.fewest[row["pxname"]] = min(up, self.fewest.get(row["pxname"], up))
            self.stop_flag.wait(self.every)

    def stop(self):
        self.stop_flag.set()
        self.join()
        for (backend, server), count in self._down_counts().items():
            self.marked_down[backend] += count - self.start_counts.get((backend, server), 0)


def amqp_round_trip(addresses, user, password, port=5672, timeout=5, queue="kst-probe"):
    """A probe: a message published to a quorum queue through a RabbitMQ node of
    `addresses`, confirmed by the broker, and read back, as an OpenStack service's RPC
    does. A connection the node closes (drained, stopped) moves to the next node, as
    oslo.messaging's does; the call fails when no node has served it within `timeout` s."""
    import amqp   # only this probe needs it (the test extras install it)
    state = {"connection": None, "node": 0}

    def channel():
        if state["connection"] is None:
            address = addresses[state["node"] % len(addresses)]
            state["node"] += 1
            connection = amqp.Connection(f"{address}:{port}", userid=user, password=password, connect_timeout=timeout,
                                         read_timeout=timeout, write_timeout=timeout, confirm_publish=True)
            connection.connect()
            state["connection"], state["channel"] = connection, connection.channel()
            state["channel"].queue_declare(queue, durable=True, auto_delete=False,
                                           arguments={"x-queue-type": "quorum"})
        return state["channel"]

    def probe():
        deadline = time.monotonic() + timeout
        while True:
            try:
                body = os.urandom(8).hex()
                channel().basic_publish(amqp.Message(body), routing_key=queue)   # returns once confirmed
                bodies = iter(lambda: channel().basic_get(queue, no_ack=True), None)
                found = any(message.body == body for message in bodies)   # (older ones: left by a call cut short)
            except Exception:
                connection, state["connection"] = state["connection"], None
                if connection is not None:
                    with contextlib.suppress(Exception):
                        connection.collect()   # drops the socket without a handshake
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            if found and time.monotonic() > deadline:
                raise TimeoutError(f"served after more than {timeout} s")
            return found
    return probe


def main(argv=None):
    """Asks keystone at ADDRESS:PORT every EVERY s until its stdin closes, then prints
    what it counted as JSON (sent, failed, the times of the answers, the longest gap
    of one client): keystone's version document, or, with the admin's password in
    KST_ADMIN_PASSWORD, tokens (its database too) and --listers clients listing
    projects with a token; or, with --amqp, RabbitMQ's round trips."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--address", help="keystone's address")
    parser.add_argument("--amqp", metavar="ADDRESS,...",
                        help="instead: RabbitMQ's nodes, as KST_AMQP_USER with KST_AMQP_PASSWORD (amqp_round_trip)")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--every", type=float, default=0.05, help="seconds between two requests of a client")
    parser.add_argument("--limit", type=int, default=2000, help="requests per client at most")
    parser.add_argument("--listers", type=int, default=0, help="with a password: clients listing projects")
    parser.add_argument("--timeout", type=float, default=5, help="seconds a request may take before it counts as failed")
    parser.add_argument("--settle", type=float, default=0,
                        help="with --listers: seconds to keep asking for their token before counting starts")
    parser.add_argument("--cafile", help="with a password: ask for tokens over HTTPS, trusting this CA")
    args = parser.parse_args(argv)
    if not args.address and not args.amqp:
        parser.error("--address or --amqp is required")
    if args.cafile and args.listers:
        parser.error("--cafile: the listers ask over plain HTTP only")
    password = os.environ.get("KST_ADMIN_PASSWORD")
    if args.amqp:
        probers = [Prober(amqp_round_trip(args.amqp.split(","), os.environ["KST_AMQP_USER"], os.environ["KST_AMQP_PASSWORD"],
                                          timeout=args.timeout), args.every, args.limit)]
    elif password:
        tls = trusting(args.cafile) if args.cafile else None
        probers = [Prober(token_request(args.port, password, args.address, timeout=args.timeout, tls=tls), args.every,
                          args.limit)]
        if args.listers:
            settled = time.monotonic() + args.settle
            while True:
                try:
                    with token_issue(args.port, password, args.address, project="admin", timeout=10) as answer:
                        token = answer.headers["X-Subject-Token"]
                    break
                except OSError:   # (urllib's errors and timeouts are OSErrors)
                    if time.monotonic() > settled:
                        raise
            probers += [Prober(projects_listed(args.port, token, args.address), args.every, args.limit)
                        for _ in range(args.listers)]
    else:
        probers = [Prober(lambda: keystone_answers(args.port, 1.0, args.address), args.every, args.limit)]
    for prober in probers:
        prober.start()
    sys.stdin.read()
    for prober in probers:
        prober.stop()
    print(json.dumps({"sent": sum(p.calls for p in probers), "failed": sum(p.failed for p in probers),
                      "failures": [f for p in probers for f in p.failures],
                      "answers": sorted(t for p in probers for t in p.answers),
                      "gap": max(p.longest_gap() for p in probers)}))


if __name__ == "__main__":
    main()
