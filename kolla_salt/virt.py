"""Which virtualization a compute host offers its guests: KVM needs a /dev/kvm the
host can open and a CPU with hardware virtualization (vmx or svm); without either,
guests run under QEMU's emulation (nova_compute_virt_type qemu). A /dev/kvm without
the CPU flag exists (nested or paravirtual hosts such as kvm-pvm), and stock guests
hang under it: the flag is required too."""
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Virtualization:
    kvm: bool
    why: str

    @property
    def virt_type(self):
        return "kvm" if self.kvm else "qemu"

    def describe(self):
        return f"{self.virt_type} ({self.why})"


def judge(cpu_flags, kvm_usable):
    """`cpu_flags`: the flags of /proc/cpuinfo; `kvm_usable`: /dev/kvm opens read-write."""
    hardware = sorted({"vmx", "svm"} & set(cpu_flags))
    if hardware and kvm_usable:
        return Virtualization(True, f"/dev/kvm and the CPU flag {hardware[0]}")
    missing = ([] if hardware else ["no vmx or svm CPU flag"]) + ([] if kvm_usable else ["no usable /dev/kvm"])
    return Virtualization(False, ", ".join(missing) + ": emulation")


def detect(cpuinfo="/proc/cpuinfo", device="/dev/kvm"):
    """This host's virtualization."""
    flags = []
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    return judge(flags, os.access(device, os.R_OK | os.W_OK))
