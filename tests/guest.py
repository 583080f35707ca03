"""A server of the project's own guest (images/guest: Debian's kernel and a busybox
initramfs) booted in a deployed cloud through the real openstack client: shared by
tests/functional/test_cloud.py and benchmarks/cloud.py."""
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def openstack(config_dir, *args, values=True):
    """The real python-openstackclient, as the admin of the cloud of `config_dir`
    (its clouds.yaml); `values`: ask for bare values (`-f value`; commands that print
    nothing take no -f). Fails with the client's error."""
    proc = subprocess.run([str(Path(sys.executable).parent / "openstack"), "--os-cloud", "kolla-admin",
                           *args, *(["-f", "value"] if values else [])], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OS_CLIENT_CONFIG_FILE": str(Path(config_dir) / "clouds.yaml")})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def upload_guest(run, docker_client, image, folder, prefix):
    """The guest image's kernel and initramfs uploaded to glance (`<prefix>kernel`,
    `<prefix>ramdisk`) with a disk image naming them (`<prefix>guest`), a flavor
    `<prefix>small`, a network with its subnet `<prefix>servers` (198.18.21.0/24) and a
    keypair `<prefix>key`, whose public key it returns (the guest says which keys its
    config drive gave it). `run`: openstack with this cloud's config bound. The images
    are public: every project boots the guest (tempest's test projects too)."""
    guest = docker_client.containers.create(image, "true")
    try:
        for name in ("vmlinuz", "initrd.img"):
            bits, _ = guest.get_archive(f"/guest/{name}")
            tarfile.open(fileobj=io.BytesIO(b"".join(bits))).extractall(folder)
    finally:
        guest.remove()
    (folder / "root.img").write_bytes(bytes(1 << 20))   # the disk: the guest runs from its initramfs
    kernel = run("image", "create", "--public", "--disk-format", "aki", "--container-format", "aki", "--file",
                 str(folder / "vmlinuz"), f"{prefix}kernel", "-c", "id").strip()
    ramdisk = run("image", "create", "--public", "--disk-format", "ari", "--container-format", "ari", "--file",
                  str(folder / "initrd.img"), f"{prefix}ramdisk", "-c", "id").strip()
    # os_shutdown_timeout 0: busybox has no ACPI daemon, so `server stop` powers off at once.
    run("image", "create", "--public", "--disk-format", "raw", "--container-format", "bare", "--file", str(folder / "root.img"),
        "--property", f"kernel_id={kernel}", "--property", f"ramdisk_id={ramdisk}",
        "--property", "os_command_line=console=ttyS0", "--property", "os_shutdown_timeout=0", f"{prefix}guest")
    run("flavor", "create", "--ram", "128", "--disk", "1", "--vcpus", "1", f"{prefix}small")
    run("network", "create", f"{prefix}servers")
    run("subnet", "create", "--network", f"{prefix}servers", "--subnet-range", "198.18.21.0/24", f"{prefix}servers")
    run("keypair", "create", f"{prefix}key", values=False)   # (the client makes it; the private key is not kept)
    return run("keypair", "show", "--public-key", f"{prefix}key", values=False).strip()


def boot_server(run, prefix, name="server", options=()):
    """`server create --wait` of the guest on its network with its keypair (named prefix
    + name; more `server create` options in `options`): the server as `server show` has it."""
    server_id = run("server", "create", "--image", f"{prefix}guest", "--flavor", f"{prefix}small", "--network",
                    f"{prefix}servers", "--key-name", f"{prefix}key", *options, "--wait", f"{prefix}{name}",
                    "-c", "id").strip()
    return json.loads(run("server", "show", server_id, "-f", "json", values=False))


def console_log(run, server_id):
    return run("console", "log", "show", server_id, values=False)


def wait_for(what, condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} in {seconds} s"
        time.sleep(1)


def remove_guest(run, prefix):
    """Everything upload_guest and boot_server made (what is already gone is skipped)."""
    def attempt(*args):
        try:
            return run(*args, values=False)
        except AssertionError:   # deleted already, or never made
            return ""

    servers = attempt("server", "list", "--name", f"^{prefix}", "-f", "value", "-c", "ID").split()
    if servers:
        attempt("server", "delete", "--wait", *servers)
    for kind, name in (("port", "prober"), ("network", "servers"), ("flavor", "small"), ("keypair", "key"),
                       ("image", "guest"), ("image", "kernel"), ("image", "ramdisk")):
        attempt(kind, "delete", f"{prefix}{name}")
