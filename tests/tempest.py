"""OpenStack's own acceptance tests (tempest) against a deployed cloud: tempest in a
virtualenv of its own (.venv/tempest: its pins are not the client's or Salt's), a
workspace with a tempest.conf that says what this cloud has, and a run of a chosen
set of tests. Used by tests/functional/test_cloud.py.

The virtualenv is made in the background from the start of a run that will use it
(tests/conftest.py): 30 s of downloads and unpacking, most of it while the tests
before the cloud's leave a core idle."""
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv" / "tempest"
INSTALLED = VENV / "installed"   # written last: a virtualenv without it is a partial one
LOG = REPO / ".venv" / "tempest-install.log"
_installing = None
# The API smoke tests of identity, compute and network (tokens and the API's versions;
# servers, flavors, keypairs, security groups; networks, subnets, ports, routers):
# minutes, not an hour. Scenario tests log in to their servers with ssh, which the
# project's guest does not serve.
SMOKE = r"^tempest\.api\.(identity|compute|network)\..*\[.*\bsmoke\b.*\]"


def install_in_background():
    """Starts making .venv/tempest unless it is made (its output in .venv/tempest-install.log)."""
    global _installing
    if _installing is None and not INSTALLED.exists():
        venv, python, installed = (shlex.quote(str(path)) for path in (VENV, sys.executable, INSTALLED))
        script = f"rm -rf {venv} && {python} -m venv {venv} && {venv}/bin/pip install -q tempest && touch {installed}"
        LOG.parent.mkdir(exist_ok=True)
        with LOG.open("w") as log:
            _installing = subprocess.Popen(["sh", "-c", script], stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)


def stop_background_install():
    """Ends an installation still going when the run ends (one stopped early): the next
    run starts it again."""
    if _installing is not None and _installing.poll() is None:
        os.killpg(_installing.pid, signal.SIGKILL)
        _installing.wait()


def tempest():
    """The tempest command, once its virtualenv is made."""
    if not INSTALLED.exists():
        print("[tempest] waiting for tempest's installation into .venv/tempest", flush=True)
        install_in_background()
        _installing.wait()
        assert INSTALLED.exists(), f"tempest's installation failed: {LOG.read_text()[-3000:]}"
    return str(VENV / "bin" / "tempest")


def config(admin_password, keystone_url, region, image, flavor, services, network_extensions, ca_file=None):
    """tempest.conf for the cloud: the admin makes a project, user and network per
    test class (dynamic credentials); `image` and `flavor` (ids) are what servers
    boot; `services`: {tempest's service name: available}; `network_extensions`:
    the aliases neutron lists (OVN has no agent schedulers); `ca_file`: the CA that
    signed the certificates of an https cloud (tempest verifies them with it).
    Features this all-in-one cloud has not (volumes, migration, resize, snapshots of
    kernel/ramdisk guests, a guest that answers ssh) are off."""
    available = "\n".join(f"{name} = {str(on).lower()}" for name, on in sorted(services.items()))
    trusted = f"ca_certificates_file = {ca_file}\ndisable_ssl_certificate_validation = false\n" if ca_file else ""
    return f"""[DEFAULT]
log_file = tempest.log

[auth]
admin_username = admin
admin_password = {admin_password}
admin_project_name = admin
admin_domain_name = Default
use_dynamic_credentials = true

[identity]
uri_v3 = {keystone_url}/v3
auth_version = v3
region = {region}
{trusted}
[identity-feature-enabled]
api_v2 = false

[compute]
image_ref = {image}
image_ref_alt = {image}
flavor_ref = {flavor}
flavor_ref_alt = {flavor}
min_compute_nodes = 1
build_timeout = 180

[compute-feature-enabled]
console_output = true
vnc_console = true
serial_console = false
resize = false
cold_migration = false
live_migration = false
snapshot = false
suspend = false
shelve = false
rescue = false
change_password = false
config_drive = false
personality = false
interface_attach = false
attach_encrypted_volume = false

[network]
project_networks_reachable = false

[network-feature-enabled]
ipv6 = false
api_extensions = {",".join(network_extensions)}

[validation]
run_validation = false

[service_available]
{available}
"""


def run(workspace, conf, regex=SMOKE, timeout=900):
    """Runs the tests `regex` selects, two at a time (tempest workers), in `workspace` (made here):
    (tempest's exit code, its summary and failures, the lines of the tests that passed)."""
    command = tempest()
    workspace.mkdir(parents=True, exist_ok=True)
    # The workspace's register in the workspace too: not the user's ~/.tempest.
    subprocess.run([command, "init", "--workspace-path", str(workspace / "workspaces.yaml"), str(workspace / "cloud")],
                   check=True, capture_output=True)
    (workspace / "cloud" / "etc" / "tempest.conf").write_text(conf)
    done = subprocess.run([command, "run", "--regex", regex, "--concurrency", "2"], cwd=workspace / "cloud",
                          capture_output=True, text=True, timeout=timeout)
    passed = [line for line in done.stdout.splitlines() if line.startswith("{") and line.endswith(" ... ok")]
    return (done.returncode, failures(done.stdout) + done.stdout[done.stdout.rfind("Totals"):] + done.stderr[-2000:],
            passed)


def failures(output):
    """The failed tests of a `tempest run` output with their tracebacks, without the
    request logs that follow each (they bury the reason)."""
    kept, keeping = [], False
    for line in output.splitlines():
        if line.startswith("{"):
            keeping = line.endswith("FAILED")
        elif line.startswith("Captured pythonlogging"):
            keeping = False
        if keeping:
            kept.append(line)
    return "\n".join(kept) + "\n"
