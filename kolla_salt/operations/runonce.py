"""`kolla-salt init-runonce`: what a deployed cloud needs before its first server
(kolla-ansible's init-runonce, for this project's own guest).

It makes, through the real python-openstackclient as the cloud's admin (the
operator folder's clouds.yaml): the guest image in glance (images/guest, Debian's
kernel and a busybox initramfs: a kernel, a ramdisk and a disk image naming them,
public so that every project boots it), a flavor it fits in, a network with its
subnet and a router on it, ping and SSH allowed in by the project's default
security group, and a keypair (the operator's public key, or a new one
whose private key is kept 0600 in the operator folder). What is there already is
kept: a second run makes nothing. It ends with the `openstack server create` line
that boots a server.
"""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ..errors import KollaError
from ..private import write_private
from .clouds import CLOUD_NAME


def client_command(config_dir, *args):
    """(environment, argv) of the real python-openstackclient (the one beside this
    Python) running `args` as the admin of the cloud of `config_dir` (its clouds.yaml)."""
    return ({"OS_CLIENT_CONFIG_FILE": str(Path(config_dir) / "clouds.yaml")},
            [str(Path(sys.executable).parent / "openstack"), "--os-cloud", CLOUD_NAME, *args])


def openstack(config_dir, *args, values=True):
    """client_command's run; `values`: ask for bare values (`-f value`; commands that
    print nothing take no -f). Its output, or its error if it fails."""
    environment, argv = client_command(config_dir, *args, *(["-f", "value"] if values else []))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, **environment})
    if proc.returncode:
        raise KollaError(f"openstack {' '.join(args[:2])}: {proc.stderr.strip()[-600:]}")
    return proc.stdout


PARTS = ("guest", "kernel", "ramdisk", "small", "servers", "router", "key")


def names(prefix):
    """What init-runonce makes, each named `prefix` + its part: the images guest,
    kernel and ramdisk, the flavor small, the network (and subnet) servers, the
    router and the keypair key."""
    return {part: prefix + part for part in PARTS}


def guest_files(client, image, folder):
    """The guest image's kernel and initramfs, copied out of the Docker image `image`
    into `folder`, with an empty 1 MiB disk (the guest runs from its initramfs)."""
    guest = client.containers.create(image, "true")
    try:
        for name in ("vmlinuz", "initrd.img"):
            bits, _ = guest.get_archive(f"/guest/{name}")
            tarfile.open(fileobj=io.BytesIO(b"".join(bits))).extractall(folder, filter="data")
    finally:
        guest.remove()
    (Path(folder) / "root.img").write_bytes(bytes(1 << 20))
    return {name: Path(folder) / name for name in ("vmlinuz", "initrd.img", "root.img")}


def init_runonce(run, client, image, prefix, cidr, public_key=None, key_file=None, out=print):
    """Makes what is missing of names(`prefix`) in the cloud `run` (openstack with
    the cloud's config bound) reaches; `image`: the guest's Docker image; `cidr`: the
    subnet's range. The keypair takes `public_key` (its text), else a new one is made
    and its private key written to `key_file`. Returns the arguments of the `openstack
    server create` that boots a server of them."""
    guest, kernel, ramdisk, small, servers, router, key = names(prefix).values()

    def missing(kind, name, *options):
        there = name in run(kind, "list", *options, "-c", "Name").splitlines()
        if there:
            out(f"[init-runonce] {kind} {name}: there already")
        return not there

    def made(kind, what):
        out(f"[init-runonce] {kind} {what}: created")

    if missing("image", guest):
        with tempfile.TemporaryDirectory() as folder:
            files = guest_files(client, image, folder)
            ids = {}
            for name, disk_format, path in ((kernel, "aki", files["vmlinuz"]), (ramdisk, "ari", files["initrd.img"])):
                ids[name] = run("image", "list", "--name", name, "-c", "ID").split()[:1]   # a run killed after it
                if not ids[name]:
                    ids[name] = [run("image", "create", "--public", "--disk-format", disk_format, "--container-format",
                                     disk_format, "--file", str(path), name, "-c", "id").strip()]
                    made("image", name)
            # os_shutdown_timeout 0: busybox has no ACPI daemon, so `server stop` powers off at once.
            run("image", "create", "--public", "--disk-format", "raw", "--container-format", "bare",
                "--file", str(files["root.img"]), "--property", f"kernel_id={ids[kernel][0]}",
                "--property", f"ramdisk_id={ids[ramdisk][0]}", "--property", "os_command_line=console=ttyS0",
                "--property", "os_shutdown_timeout=0", guest, values=False)
            made("image", guest)
    if missing("flavor", small, "--all"):
        run("flavor", "create", "--ram", "128", "--disk", "1", "--vcpus", "1", small, values=False)
        made("flavor", small)
    if missing("network", servers):
        run("network", "create", servers, values=False)
        made("network", servers)
    if missing("subnet", servers):
        run("subnet", "create", "--network", servers, "--subnet-range", cidr, servers, values=False)
        made("subnet", f"{servers} ({cidr})")
    if missing("router", router):
        run("router", "create", router, values=False)
        made("router", router)
    if not run("port", "list", "--router", router, "--fixed-ip", f"subnet={servers}", "-c", "ID").strip():
        run("router", "add", "subnet", router, servers, values=False)
        out(f"[init-runonce] router {router}: on subnet {servers}")
    # kolla-ansible's init-runonce opens ping and SSH in the project's default security
    # group: without it only the group's own servers reach a server (its floating IP too).
    project = run("token", "issue", "-c", "project_id").strip()
    group = next(line.split()[0] for line in run("security", "group", "list", "--project", project, "-c", "ID",
                                                    "-c", "Name").splitlines() if line.split()[1:] == ["default"])
    rules = json.loads(run("security", "group", "rule", "list", group, "--ingress", "--long", "-f", "json",
                           values=False))
    for name, protocol, ports, options in (("ping", "icmp", None, ()), ("SSH", "tcp", "22:22", ("--dst-port", "22"))):
        if any(r["IP Protocol"] == protocol and r["Port Range"] in (ports, "") and r["Ethertype"] == "IPv4"
               for r in rules):
            out(f"[init-runonce] security group rule default: {name} in: there already")
            continue
        run("security", "group", "rule", "create", "--ingress", "--protocol", protocol, *options, group, values=False)
        made("security group rule", f"default: {name} in")
    if missing("keypair", key):
        if public_key is not None:
            with tempfile.NamedTemporaryFile("w", suffix=".pub") as given:
                given.write(public_key)
                given.flush()
                run("keypair", "create", "--public-key", given.name, key, values=False)
            made("keypair", f"{key} (your public key)")
        else:
            write_private(key_file, run("keypair", "create", key, values=False))
            made("keypair", f"{key} (its private key: {key_file}, mode 0600)")
    return ("server", "create", "--image", guest, "--flavor", small, "--network", servers, "--key-name", key,
            "--wait", f"{prefix}server1")
