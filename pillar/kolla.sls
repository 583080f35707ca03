#!py
"""The whole kolla pillar, built and validated by kolla_salt.declaration.inventory from the
operator's folder (minion/master option kolla_config_dir, default /etc/kolla-salt).

A minion gets what its host runs (compiled by the master, or by salt-call --local).
The master's own pillar, compiled in `salt-run` for state.orchestrate, holds only
where each service runs (kolla:placement): no secret, no host's address.
(__role cannot tell them apart: the master compiles every minion's pillar.)

Operator files that do not validate give a pillar without `kolla` whose
`kolla_problems` names each file and key (kolla.deploy's first state and every
kolla_container function say them as they are; Salt's own render error would hide
them in a log). Warnings (a certificate soon expiring) come as `kolla_warnings`."""
from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.declaration.roles import placement
from kolla_salt.declaration.virt import Virtualization
from kolla_salt.errors import ValidationError


def peer_interfaces():
    """{minion: ip4_interfaces} of every minion in the master's cache of grains (haproxy
    on one host fronts the services of all); None under salt-call --local."""
    if __opts__.get("__role") != "master":   # salt-call --local compiles its own
        return None
    import salt.cache
    cache = salt.cache.factory(__opts__)
    found = {}
    for minion in cache.list("grains"):   # Salt 3008's bank of the minions' grains
        grains = cache.fetch("grains", minion) or {}
        if grains.get("ip4_interfaces"):
            found[minion] = grains["ip4_interfaces"]
    return found or None


def run():
    config_dir = __opts__.get("kolla_config_dir", "/etc/kolla-salt")
    if "run" in __opts__.get("__cli", ""):   # salt-run (or a wrapper of it, as salt-factories')
        return {"kolla": {"placement": placement(config_dir)}}
    found = __grains__.get("kolla_virtualization")   # a minion's own (salt/_grains), once synced
    warnings = []
    try:
        pillar = build_pillar(config_dir, minion_id=__opts__["id"], warnings=warnings,
                              interfaces=__grains__.get("ip4_interfaces") or None, peer_interfaces=peer_interfaces(),
                              virtualization=Virtualization(**found) if found else None)
    except ValidationError as error:
        return {"kolla_problems": error.problems}
    return {**pillar, **({"kolla_warnings": warnings} if warnings else {})}
