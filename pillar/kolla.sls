#!py
"""The whole kolla pillar, built and validated by kolla_salt.inventory from the
operator's folder (minion/master option kolla_config_dir, default /etc/kolla-salt)."""
from kolla_salt.inventory import build_pillar


def run():
    return build_pillar(__opts__.get("kolla_config_dir", "/etc/kolla-salt"),
                        minion_id=__opts__["id"],
                        interfaces=__grains__.get("ip4_interfaces") or None)
