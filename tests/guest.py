"""A server of the project's own guest (images/guest: Debian's kernel and a busybox
initramfs) booted in a deployed cloud through the real openstack client: shared by
tests/functional/test_cloud.py and benchmarks/cloud.py."""
import atexit
import json
import subprocess
import sys
import threading
import time

from kolla_salt.operations import runonce

# The client's process: python-openstackclient imported once, each command run in a
# child forked from it, so that no command sees what another left in the client's
# modules (one kept a glance endpoint of before TLS), and the importing is not paid
# again: a command as a process of its own spent about 2 s of CPU on it.
CLIENT = r"""
import json, os, signal, sys, tempfile, traceback
from openstackclient import shell
replies = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    argv, environment = json.loads(line)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.environ.update(environment)
            for fd, target in ((0, os.open(os.devnull, os.O_RDONLY)), (1, out.fileno()), (2, err.fileno())):
                os.dup2(target, fd)
            signal.alarm(300)   # a command that hangs ends, as subprocess.run's timeout did
            try:
                code = shell.main(argv)
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code or 0)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        out.seek(0)
        err.seek(0)
        replies.write(json.dumps([status, out.read().decode(errors="replace"), err.read().decode(errors="replace")]))
        replies.write("\n")
        replies.flush()
"""
_client = []
_ONE_AT_A_TIME = threading.Lock()


def openstack(config_dir, *args, values=True):
    """The real python-openstackclient, with the arguments and cloud
    kolla_salt.operations.runonce.openstack gives it, run by the client's process (CLIENT). Its
    output, or the test fails with its error."""
    environment, argv = runonce.client_command(config_dir, *args, *(["-f", "value"] if values else []))
    with _ONE_AT_A_TIME:
        if not _client:
            _client.append(subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True))
            atexit.register(_end_client, _client[0])
        _client[0].stdin.write(json.dumps([argv[1:], environment]) + "\n")
        _client[0].stdin.flush()
        code, out, err = json.loads(_client[0].stdout.readline())
    if code:
        raise AssertionError(f"openstack {' '.join(args[:2])}: {err.strip()[-600:]}")
    return out


def _end_client(client):
    client.stdin.close()   # its loop ends
    client.wait(timeout=30)


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
