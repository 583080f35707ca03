"""Grain kolla_virtualization: what this host offers guests (kolla_salt.virt), for the
pillar a master compiles for it (nova_compute_virt_type)."""


def kolla_virtualization():
    from kolla_salt.virt import detect
    found = detect()
    return {"kolla_virtualization": {"kvm": found.kvm, "why": found.why}}
