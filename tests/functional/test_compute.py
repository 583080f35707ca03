"""libvirt on a compute host (the compute-operation set, before nova drives it): a
guest made by the project's own `guest` image boots under QEMU, and it keeps
running, and libvirt keeps managing it, while the libvirt container is upgraded
to a new image and its set (compute-operation) rolled back."""
import io
import os

import pytest
from conftest import IMAGES, KollaEnv, qemu_pid, while_running
from guest import wait_for

from kolla_salt.declaration.settings import default_tag

pytestmark = pytest.mark.functional
DOMAIN = "kstcompguest"
IMAGES_DIR = f"/var/lib/libvirt/images/{DOMAIN}"   # in libvirt's volume
GUEST_XML = f"""<domain type='qemu'>
  <name>{DOMAIN}</name>
  <memory unit='MiB'>96</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{IMAGES_DIR}/vmlinuz</kernel>
    <initrd>{IMAGES_DIR}/initrd.img</initrd>
    <cmdline>console=ttyS0 quiet</cmdline>
  </os>
  <devices>
    <serial type='file'><source path='/var/log/libvirt/qemu/{DOMAIN}-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


@pytest.fixture(scope="module")
def compute(tmp_path_factory, docker_client, built_images):
    built_images("libvirt", "guest")
    env = KollaEnv(tmp_path_factory.mktemp("compute"), "kstcomp-")
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_memcached=False, enable_keystone=False,
                      enable_libvirt=True)
    env.run("deploy")
    yield env
    end_guest(docker_client, env)
    env.cleanup(docker_client)


def virsh(docker_client, env, *args):
    result = docker_client.containers.get(env.name("nova_libvirt")).exec_run(
        ["virsh", "--connect", "qemu:///system", *args])
    assert result.exit_code == 0, result.output.decode()
    return result.output.decode()


def console(env):
    path = env.root / "log" / "libvirt" / "qemu" / f"{DOMAIN}-console.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_a_guest_boots_and_outlives_its_libvirt_container_being_upgraded_and_rolled_back(compute, docker_client):
    env = compute
    libvirt = docker_client.containers.get(env.name("nova_libvirt"))
    assert libvirt.attrs["HostConfig"]["PidMode"] == "host"
    assert "reasons" in libvirt.labels.get("kolla.spec", "")   # why it is privileged is in its spec
    # The guest's kernel and initramfs, from the guest image, into libvirt's volume.
    docker_client.containers.run(
        f"{IMAGES}/guest:{default_tag()}", ["sh", "-c", f"mkdir -p {IMAGES_DIR} && cp /guest/* {IMAGES_DIR}/"],
        volumes={env.name("libvirtd"): {"bind": "/var/lib/libvirt", "mode": "rw"}}, remove=True)
    libvirt.put_archive("/var/lib/libvirt/images", _tar(f"{DOMAIN}.xml", GUEST_XML))
    virsh(docker_client, env, "create", f"/var/lib/libvirt/images/{DOMAIN}.xml")
    booted = wait_for("boot message on the console", lambda: "kolla-salt guest: booted" in console(env), 120, 0.5)
    print(f"\nguest: from `virsh create` to its boot message {booted:.1f} s (QEMU emulation)")
    # It says it is alive each second once it gave up on a metadata service (no NIC
    # here: about 35 s): from then on a console silent during a swap is measured.
    wait_for("'alive' on the console", lambda: "kolla-salt guest: alive" in console(env), 120, 0.5)
    qemu = qemu_pid(DOMAIN)
    assert qemu

    # A new libvirt image (the built one plus a label: new content) replaces the container.
    image = libvirt.image
    docker_client.images.build(fileobj=io.BytesIO(f"FROM {image.id}\nLABEL kolla.test=kstcomp\n".encode()),
                               tag=f"{IMAGES}/libvirt:kstcomp-new", rm=True)
    try:
        env.write_globals(libvirt_tag="kstcomp-new")
        out, longest = while_running(env, ("upgrade", "--services", "libvirt"), lambda: console(env).count("alive"))
        assert "nova_libvirt recreated" in out, out
        assert docker_client.containers.get(env.name("nova_libvirt")).image.tags == [f"{IMAGES}/libvirt:kstcomp-new"]
        assert qemu_pid(DOMAIN) == qemu   # the same qemu process
        assert f"{DOMAIN}" in virsh(docker_client, env, "list", "--name")                # the new libvirtd has it
        print(f"guest during the libvirt upgrade: longest time without a console line {longest:.1f} s")
        keeps_printing(env)

        # The set's rollback (here its one container: nova-compute is not enabled) goes back the same way.
        out, longest = while_running(env, ("rollback", "--set", "compute-operation"),
                                     lambda: console(env).count("alive"))
        assert f"[rollback] {env.name('nova_libvirt')}: generation 3 runs what generation 1 ran" in out, out
        assert docker_client.containers.get(env.name("nova_libvirt")).image.id == image.id
        assert qemu_pid(DOMAIN) == qemu and DOMAIN in virsh(docker_client, env, "list", "--name")
        print(f"guest during the set's rollback: longest time without a console line {longest:.1f} s")
        keeps_printing(env)
        virsh(docker_client, env, "destroy", DOMAIN)
        wait_for("end of qemu after `virsh destroy`", lambda: ended(qemu), 30, 0.2)   # libvirt still manages it
    finally:
        env.write_globals(libvirt_tag="")
        docker_client.images.remove(f"{IMAGES}/libvirt:kstcomp-new", force=True)
        end_guest(docker_client, env)   # a failure above leaves it running: the next test makes it again


def keeps_printing(env, seconds=30):
    """The guest goes on writing its console after the swap: its qemu (the same PID,
    asserted before) runs, not stopped. How long it was silent during the swap is a
    figure (printed), not a bound: on a slow machine a TCG guest starved for a few
    seconds while containers start (5.4 s once) is not a guest that stopped."""
    printed = console(env).count("alive")
    wait_for(f"3 more 'alive' lines on the console: {console(env)[-500:]}",
             lambda: console(env).count("alive") >= printed + 3, seconds, 0.5)


def ended(pid):
    return not os.path.exists(f"/proc/{pid}")


def end_guest(docker_client, env):
    """Ends this module's guest if it runs: by libvirt, else its qemu by PID."""
    qemu = qemu_pid(DOMAIN)
    if not qemu:
        return
    for libvirt in docker_client.containers.list(filters={"name": env.name("nova_libvirt")}):
        libvirt.exec_run(["virsh", "--connect", "qemu:///system", "destroy", DOMAIN])
    try:
        wait_for("end of qemu after `virsh destroy`", lambda: ended(qemu), 30, 0.2)
    except AssertionError:   # libvirt gone or stuck: end it by its PID
        os.kill(qemu, 9)


def _tar(name, text):
    import tarfile
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_destroy_ends_the_guests_first_and_keeps_their_disks(compute, docker_client):
    """Guests outlive libvirt's container by design, so `destroy` ends them before it
    removes the container (else their qemu would run on with nothing to manage it);
    the volume with their files stays."""
    env = compute
    virsh(docker_client, env, "create", f"/var/lib/libvirt/images/{DOMAIN}.xml")
    qemu = qemu_pid(DOMAIN)
    assert qemu
    out = env.run("destroy", "--yes-i-really-mean-it").stdout
    assert f"[destroy] {env.name('nova_libvirt')}: sh -c for guest in" in out, out
    wait_for("end of the guest's qemu by `destroy`", lambda: ended(qemu), 30, 0.2)
    assert not docker_client.containers.list(all=True, filters={"name": env.name("nova_libvirt")})
    files = docker_client.containers.run(f"{IMAGES}/guest:{default_tag()}", ["ls", IMAGES_DIR],
                                         volumes={env.name("libvirtd"): {"bind": "/var/lib/libvirt", "mode": "ro"}},
                                         remove=True)
    assert b"vmlinuz" in files
