"""Which virtualization a host offers. Guests: KVM needs a /dev/kvm the host can
open and a CPU with hardware virtualization (vmx or svm); without either, guests run
under QEMU's emulation (nova_compute_virt_type qemu). A /dev/kvm without the CPU
flag exists (nested or paravirtual hosts such as kvm-pvm), and stock guests hang
under it: the flag is required too. Switches: Open vSwitch forwards in the kernel
(datapath_type system) where its module is loaded, else in ovs-vswitchd itself
(netdev, the userspace datapath: slower, but needs nothing of the kernel)."""
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Virtualization:
    kvm: bool
    why: str
    ovs_kernel_datapath: bool = False

    @property
    def virt_type(self):
        return "kvm" if self.kvm else "qemu"

    @property
    def ovs_datapath_type(self):
        return "system" if self.ovs_kernel_datapath else "netdev"

    def describe(self):
        return f"{self.virt_type} ({self.why})"


def judge(cpu_flags, kvm_usable):
    """`cpu_flags`: the flags of /proc/cpuinfo; `kvm_usable`: /dev/kvm opens read-write."""
    hardware = sorted({"vmx", "svm"} & set(cpu_flags))
    if hardware and kvm_usable:
        return Virtualization(True, f"/dev/kvm and the CPU flag {hardware[0]}")
    missing = ([] if hardware else ["no vmx or svm CPU flag"]) + ([] if kvm_usable else ["no usable /dev/kvm"])
    return Virtualization(False, ", ".join(missing) + ": emulation")


def detect(cpuinfo="/proc/cpuinfo", device="/dev/kvm", ovs_module="/sys/module/openvswitch"):
    """This host's virtualization (the openvswitch module counts once loaded:
    `modprobe openvswitch` before the deploy for the kernel datapath)."""
    flags = []
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    found = judge(flags, os.access(device, os.R_OK | os.W_OK))
    return Virtualization(found.kvm, found.why, os.path.isdir(ovs_module))
