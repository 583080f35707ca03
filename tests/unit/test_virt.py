"""Which virtualization a compute host's guests get (kolla_salt.declaration.virt) and what the
pillar makes of nova_compute_virt_type."""
import json

import pytest
import yaml

from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.declaration.merge import parse_ini
from kolla_salt.declaration.virt import Virtualization, judge
from kolla_salt.errors import ValidationError
from operator_files import write_secrets


def test_kvm_needs_both_a_usable_device_and_the_cpu_flag():
    assert judge(["fpu", "vmx", "sse2"], kvm_usable=True).virt_type == "kvm"
    assert judge(["svm"], kvm_usable=True).describe() == "kvm (/dev/kvm and the CPU flag svm)"
    # A /dev/kvm without the flag (kvm-pvm, nested hosts): stock guests hang there.
    assert judge(["fpu", "sse2"], kvm_usable=True).describe() == "qemu (no vmx or svm CPU flag: emulation)"
    assert judge(["vmx"], kvm_usable=False).describe() == "qemu (no usable /dev/kvm: emulation)"


def nova_services(folder, virt_type, found):
    """{service name: its pillar entry} with nova and a compute host enabled."""
    (folder / "globals.yml").write_text(yaml.safe_dump({
        "enable_nova": True, "enable_nova_compute": True, "enable_libvirt": True, "nova_compute_virt_type": virt_type}))
    pillar = build_pillar(folder, interfaces={"lo": ["127.0.0.1"]}, virtualization=found)
    return {service["name"]: service for service in pillar["kolla"]["services"]}


def compute_conf(folder, virt_type, found):
    return nova_services(folder, virt_type, found)["nova_compute"]["containers"][0]["files"]["nova.conf"]


def test_an_empty_virt_type_takes_what_the_host_offers_and_kvm_is_refused_where_it_has_none(tmp_path):
    write_secrets(tmp_path)
    kvm, emulation = Virtualization(True, "/dev/kvm and the CPU flag vmx"), Virtualization(False, "no usable /dev/kvm: emulation")
    assert "virt_type = kvm" in compute_conf(tmp_path, "", kvm)
    conf = compute_conf(tmp_path, "", emulation)
    assert "virt_type = qemu" in conf and "cpu_mode = none" in conf
    assert "virt_type = qemu" in compute_conf(tmp_path, "qemu", kvm)     # the operator may choose emulation
    with pytest.raises(ValidationError) as refused:
        compute_conf(tmp_path, "kvm", emulation)
    assert str(refused.value) == (f"{tmp_path / 'globals.yml'}: key 'nova_compute_virt_type' is kvm, but local has "
                                  f"no usable /dev/kvm: set it to qemu (emulation), or leave it empty for what each "
                                  f"host offers")
    with pytest.raises(ValidationError, match="key 'nova_compute_virt_type' must be kvm, qemu or empty"):
        compute_conf(tmp_path, "xen", kvm)


def vswitchd_command(folder, datapath_type, found):
    (folder / "globals.yml").write_text(yaml.safe_dump({"enable_openvswitch": True, "ovs_datapath_type": datapath_type}))
    pillar = build_pillar(folder, interfaces={"lo": ["127.0.0.1"]}, virtualization=found)
    (ovs,) = [s for s in pillar["kolla"]["services"] if s["name"] == "openvswitch"]
    (vswitchd,) = [c for c in ovs["containers"] if c["spec"]["name"] == "openvswitch_vswitchd"]
    return json.loads(vswitchd["files"]["config.json"])["command"].split()


def test_open_vswitch_forwards_in_the_kernel_only_where_its_module_is_loaded(tmp_path):
    write_secrets(tmp_path)
    kernel = Virtualization(False, "no usable /dev/kvm: emulation", ovs_kernel_datapath=True)
    userspace = Virtualization(False, "no usable /dev/kvm: emulation")
    assert vswitchd_command(tmp_path, "", kernel) == ["kolla_ovs_vswitchd_start", "system", "br-int"]
    assert vswitchd_command(tmp_path, "", userspace) == ["kolla_ovs_vswitchd_start", "netdev", "br-int"]
    assert vswitchd_command(tmp_path, "netdev", kernel)[1] == "netdev"     # the operator may choose userspace
    with pytest.raises(ValidationError, match="key 'ovs_datapath_type' must be system"):
        vswitchd_command(tmp_path, "dpdk", kernel)


def test_the_kernel_datapath_is_found_by_its_loaded_module(tmp_path):
    from kolla_salt.declaration.virt import detect
    (tmp_path / "cpuinfo").write_text("flags\t\t: fpu sse2\n")
    assert detect(tmp_path / "cpuinfo", tmp_path / "kvm", tmp_path / "openvswitch").ovs_datapath_type == "netdev"
    (tmp_path / "openvswitch").mkdir()
    assert detect(tmp_path / "cpuinfo", tmp_path / "kvm", tmp_path / "openvswitch").ovs_datapath_type == "system"


def test_every_nova_service_ends_its_graceful_shutdown_before_docker_kills_it(tmp_path):
    """nova (2026.1) waits manager_shutdown_timeout (160 s by default) on SIGTERM, then
    cleans up: a container killed at its stop_timeout never cleans up, and every swap
    of it waits the whole stop_timeout."""
    write_secrets(tmp_path)
    services = nova_services(tmp_path, "qemu", Virtualization(False, "emulation"))
    containers = services["nova"]["containers"] + services["nova_compute"]["containers"]
    assert {c["spec"]["name"] for c in containers} >= {"nova_conductor", "nova_scheduler", "nova_api", "nova_compute"}
    for container in containers:
        name = container["spec"]["name"]
        default = dict(next(items for section, items in parse_ini(container["files"]["nova.conf"], name)
                            if section == "DEFAULT"))
        grace, shutdown = int(default["manager_shutdown_timeout"]), int(default["graceful_shutdown_timeout"])
        assert 0 < grace < shutdown < container["spec"]["stop_timeout"], name


def test_a_folders_host_offers_of_an_unknown_fact_is_refused_naming_the_file_and_key(tmp_path, monkeypatch):
    """What a setting takes from the host is the folder's (settings.yml `host_offers`):
    a fact no host reports is refused before anything is rendered."""
    import shutil

    from kolla_salt import paths
    from kolla_salt.declaration.settings import load_settings
    services = tmp_path / "services"
    shutil.copytree(paths.SERVICES_DIR, services, ignore=lambda d, names: [n for n in names if n == "templates"])
    memo = services / "memo" / "settings.yml"
    memo.parent.mkdir()
    memo.write_text(yaml.safe_dump({"set": "control", "settings": {"enable_memo": False, "memo_disk": ""},
                                    "host_offers": {"memo_disk": {"fact": "ssd"}}}))
    monkeypatch.setattr(paths, "SERVICES_DIR", services)
    with pytest.raises(ValidationError) as refused:
        load_settings(tmp_path)
    assert f"{memo}: key 'host_offers.memo_disk': expected {{fact: one of virt_type, ovs_datapath_type" \
        in str(refused.value)
