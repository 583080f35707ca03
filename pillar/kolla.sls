#!py
"""The whole kolla pillar, built and validated by kolla_salt.inventory from the
operator's folder (minion/master option kolla_config_dir, default /etc/kolla-salt).

A minion gets what its host runs (compiled by the master, or by salt-call --local).
The master's own pillar, compiled in `salt-run` for state.orchestrate, holds only
where each service runs (kolla:placement): no secret, no host's address.
(__role cannot tell them apart: the master compiles every minion's pillar.)"""
from kolla_salt.inventory import build_pillar, placement


def run():
    config_dir = __opts__.get("kolla_config_dir", "/etc/kolla-salt")
    if "run" in __opts__.get("__cli", ""):   # salt-run (or a wrapper of it, as salt-factories')
        return {"kolla": {"placement": placement(config_dir)}}
    return build_pillar(config_dir, minion_id=__opts__["id"],
                        interfaces=__grains__.get("ip4_interfaces") or None)
