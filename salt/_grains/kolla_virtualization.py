"""Grain kolla_virtualization: what this host offers guests and switches
(kolla_salt.declaration.virt), for the pillar a master compiles for it (nova_compute_virt_type,
ovs_datapath_type)."""


def kolla_virtualization():
    from kolla_salt.declaration.virt import detect
    found = detect()
    return {"kolla_virtualization": {"kvm": found.kvm, "why": found.why, "ovs_kernel_datapath": found.ovs_kernel_datapath}}
