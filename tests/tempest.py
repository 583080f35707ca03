"""OpenStack's own acceptance tests (tempest) against a deployed cloud: tempest in a
virtualenv of its own (.venv/tempest, made on first use: its pins are not the
client's or Salt's), a workspace with a tempest.conf that says what this cloud has,
and a run of a chosen set of tests. Used by tests/functional/test_cloud.py."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv" / "tempest"
# The API smoke tests of compute and network (servers, flavors, keypairs, security
# groups; networks, subnets, ports, routers): minutes, not an hour. Scenario tests
# log in to their servers with ssh, which the project's guest does not serve.
SMOKE = r"^tempest\.api\.(compute|network)\..*\[.*\bsmoke\b.*\]"


def tempest():
    """The tempest command, installed on first use."""
    command = VENV / "bin" / "tempest"
    if not command.exists():
        print("[tempest] installing tempest into .venv/tempest", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "tempest"], check=True)
    return str(command)


def config(admin_password, keystone_url, region, image, flavor, services, network_extensions):
    """tempest.conf for the cloud: the admin makes a project, user and network per
    test class (dynamic credentials); `image` and `flavor` (ids) are what servers
    boot; `services`: {tempest's service name: available}; `network_extensions`:
    the aliases neutron lists (OVN has no agent schedulers). Features this all-in-one
    cloud has not (volumes, migration, resize, snapshots of kernel/ramdisk guests, a
    guest that answers ssh) are off."""
    available = "\n".join(f"{name} = {str(on).lower()}" for name, on in sorted(services.items()))
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
    (tempest's exit code, its summary and failures)."""
    command = tempest()
    workspace.mkdir(parents=True, exist_ok=True)
    # The workspace's register in the workspace too: not the user's ~/.tempest.
    subprocess.run([command, "init", "--workspace-path", str(workspace / "workspaces.yaml"), str(workspace / "cloud")],
                   check=True, capture_output=True)
    (workspace / "cloud" / "etc" / "tempest.conf").write_text(conf)
    done = subprocess.run([command, "run", "--regex", regex, "--concurrency", "2"], cwd=workspace / "cloud",
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, failures(done.stdout) + done.stdout[done.stdout.rfind("Totals"):] + done.stderr[-2000:]


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
