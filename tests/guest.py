"""A server of the project's own guest (images/guest: Debian's kernel and a busybox
initramfs) booted in a deployed cloud through the real openstack client: shared by
tests/functional/test_cloud.py and benchmarks/cloud.py."""
import contextlib
import io
import json
import logging
import os
import threading
import time

from kolla_salt import runonce

# One command at a time: the client reads its cloud from the process's environment
# and prints on the process's stdout.
_ONE_AT_A_TIME = threading.Lock()


def openstack(config_dir, *args, values=True):
    """The real python-openstackclient's shell, with the arguments and cloud
    kolla_salt.runonce.openstack gives it, run in this process: as a process of its
    own a command spent about 2 s of CPU importing the client before it asked anything,
    and the suite runs hundreds. Its output, or the test fails with its error."""
    from openstackclient import shell
    environment, argv = runonce.client_command(config_dir, *args, *(["-f", "value"] if values else []))
    out, err = io.StringIO(), io.StringIO()
    with _ONE_AT_A_TIME, _environment(environment), _logging_as_it_was(), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            code = shell.main(argv[1:])
        except SystemExit as ended:   # argparse's way to refuse arguments
            code = ended.code
    if code:
        raise AssertionError(f"openstack {' '.join(args[:2])}: {err.getvalue().strip()[-600:]}")
    return out.getvalue()


@contextlib.contextmanager
def _environment(variables):
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _logging_as_it_was():
    """Each run of the client's shell adds its handler (on that run's stderr) to the
    root logger and sets levels: taken back after it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


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
