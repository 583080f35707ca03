#!/usr/bin/env python3
"""What TLS costs at the front door (issue: TLS on every API): keystone's answers per
second through haproxy on the same host, over plain HTTP on the internal VIP and over
HTTPS on the external VIP (kolla_enable_tls_external, a certificate of `kolla-salt
certificates`), with the same closed-loop users (each asks again as soon as it has
its answer, on a new connection: a full TLS handshake per request, the costliest
case), then the ratio: for tokens (a password hash each, what clients start with)
and for keystone's version document (no work behind it: the handshake's own cost).
Then the same over HTTPS with TLS behind haproxy too (kolla_enable_tls_backend:
haproxy calls keystone over TLS, a handshake per request there as well). Also the
time `certificates --renew` plus the deploy that serves the new certificates takes
(haproxy's and keystone's new generations), and the longest gap a token client saw
meanwhile.

Usage: .venv/bin/python benchmarks/tls_cost.py [--help] [--users N,N] [--seconds S]
It deploys a throw-away keystone behind haproxy (own names and ports) and removes it."""
import argparse
import ssl
import time
import urllib.request

from common import BenchEnv, Prober, token_request
from probes import load

EXTERNAL_VIP = "127.0.0.12"   # on loopback, beside the default internal VIP (127.0.0.10)


def token_probe(port, password, address, tls=None):
    return token_request(port, password, address, timeout=60, tls=tls)


def version_probe(port, password, address, tls=None):
    url = f"{'https' if tls else 'http'}://{address}:{port}/v3"

    def probe():
        with urllib.request.urlopen(url, timeout=60, context=tls) as answer:
            answer.read()
            return answer.status == 200
    return probe


def rate(probe, users, seconds):
    """(answers per second, p50 latency, failed) of `users` users asking `probe`."""
    with load({"probe": probe}, users, every=0.001) as figures:
        time.sleep(seconds)
    f = figures["probe"]
    return f["rate"], f["p50"], f["failed"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", default="1,4", help="comma-separated user counts to measure (default 1,4)")
    parser.add_argument("--seconds", type=float, default=30, help="seconds per measurement (default 30)")
    args = parser.parse_args()
    counts = [int(n) for n in args.users.split(",")]
    env = BenchEnv("kbench-tls-", enable_haproxy=True, kolla_enable_tls_external=True,
                   kolla_external_vip_address=EXTERNAL_VIP)
    try:
        print("[tls] building what is missing, making certificates, deploying keystone behind haproxy", flush=True)
        env.run("build", "mariadb", "memcached", "haproxy", "keystone", "toolbox")
        env.run("certificates")
        env.run("deploy")
        port, password = env.globals["keystone_public_port"], env.passwords()["keystone_admin_password"]
        vip = env.globals.get("kolla_internal_vip_address", "127.0.0.10")
        trusted = ssl.create_default_context(cafile=str(env.config_dir / "certificates" / "ca" / "root.crt"))
        rate(token_probe(port, password, vip), 1, 5)   # warm: keystone's caches, haproxy's first connections
        plain = {}
        for what, make in (("tokens", token_probe), ("version documents", version_probe)):
            for users in counts:
                plain[what, users] = rate(make(port, password, vip), users, args.seconds)
                tls = rate(make(port, password, EXTERNAL_VIP, trusted), users, args.seconds)
                print(f"{what}, {users} users: plain HTTP {plain[what, users][0]:6.1f}/s (p50 "
                      f"{plain[what, users][1]:.3f} s, {plain[what, users][2]} failed), HTTPS "
                      f"{tls[0]:6.1f}/s (p50 {tls[1]:.3f} s, {tls[2]} failed): "
                      f"TLS serves {tls[0] / plain[what, users][0]:.2f}x", flush=True)
        print("[tls] TLS behind haproxy too (kolla_enable_tls_backend)", flush=True)
        env.write_globals(kolla_enable_tls_backend=True, kolla_copy_ca_into_containers=True)
        env.run("certificates")
        env.run("deploy")
        for what, make in (("tokens", token_probe), ("version documents", version_probe)):
            for users in counts:
                both = rate(make(port, password, EXTERNAL_VIP, trusted), users, args.seconds)
                print(f"{what}, {users} users: HTTPS with TLS behind haproxy {both[0]:6.1f}/s (p50 {both[1]:.3f} s, "
                      f"{both[2]} failed): {both[0] / plain[what, users][0]:.2f}x plain HTTP", flush=True)
        prober = Prober(token_request(port, password, EXTERNAL_VIP, timeout=60, tls=trusted), 0.1, limit=3000)
        prober.start()
        try:
            renewal = env.timed("certificates", "--renew") + env.timed("deploy")
        finally:
            prober.stop()
        print(f"renewal (certificates --renew, deploy): {renewal:.1f} s, {prober.calls} token requests over HTTPS "
              f"meanwhile, {prober.failed} failed, longest gap {prober.longest_gap():.2f} s")
    finally:
        env.close()


if __name__ == "__main__":
    main()
