"""A server of the project's own guest (images/guest: Debian's kernel and a busybox
initramfs) booted in a deployed cloud through the real openstack client: shared by
tests/functional/test_cloud.py and benchmarks/cloud.py."""
import json
import time

from kolla_salt import runonce
from kolla_salt.errors import KollaError


def openstack(config_dir, *args, values=True):
    """kolla_salt.runonce.openstack, failing the test with the client's error."""
    try:
        return runonce.openstack(config_dir, *args, values=values)
    except KollaError as error:
        raise AssertionError(str(error)) from None


def boot_server(run, prefix, name="server", options=()):
    """`server create --wait` of the guest on its network with its keypair (named prefix
    + name; more `server create` options in `options`): the server as `server show` has
    it. A server that ends in ERROR fails with nova's fault (why it could not be built)."""
    try:
        server_id = run("server", "create", "--image", f"{prefix}guest", "--flavor", f"{prefix}small", "--network",
                        f"{prefix}servers", "--key-name", f"{prefix}key", *options, "--wait", f"{prefix}{name}",
                        "-c", "id").strip()
    except AssertionError as error:
        fault = run("server", "show", f"{prefix}{name}", "-c", "fault", "-f", "json", values=False)
        raise AssertionError(f"{error}; nova's fault: {fault}") from None
    return json.loads(run("server", "show", server_id, "-f", "json", values=False))


def console_log(run, server_id):
    return run("console", "log", "show", server_id, values=False)


def wait_for(what, condition, seconds, pause=1.0):
    """Asks `condition` until it holds, pausing as long as it took (at least `pause`
    seconds): an `openstack` command costs about 2 s of CPU, and asking without a pause
    would take a core from the boot or the upgrade it waits for. Returns the seconds
    waited."""
    began = time.monotonic()
    while True:
        asked = time.monotonic()
        if condition():
            return time.monotonic() - began
        assert asked - began < seconds, f"no {what} in {seconds} s"
        time.sleep(max(pause, time.monotonic() - asked))


def remove_guest(run, prefix):
    """Everything `kolla-salt init-runonce --prefix PREFIX` and boot_server made (what
    is already gone is skipped)."""
    def attempt(*args):
        try:
            return run(*args, values=False)
        except AssertionError:   # deleted already, or never made
            return ""

    servers = attempt("server", "list", "--name", f"^{prefix}", "-f", "value", "-c", "ID").split()
    if servers:
        attempt("server", "delete", "--wait", *servers)
    attempt("router", "remove", "subnet", f"{prefix}router", f"{prefix}servers")
    for kind, name in (("port", "prober"), ("router", "router"), ("network", "servers"), ("flavor", "small"),
                       ("keypair", "key"), ("image", "guest"), ("image", "kernel"), ("image", "ramdisk")):
        attempt(kind, "delete", f"{prefix}{name}")
