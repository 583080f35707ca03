"""Execution module: this host's Galera member, for the master's runner kolla_galera
(salt/_runners/kolla_galera.py) and the CLI's preflight. A thin adapter over
kolla_salt.operations.galera; the member is the mariadb container of this host's pillar."""
__virtualname__ = "kolla_galera"


def __virtual__():
    return __virtualname__


def _member(pillar=None):
    import docker

    from kolla_salt.containers.spec import ContainerSpec
    from kolla_salt.operations.galera import member
    # A fresh pillar unless given: the master asks before the deploy that may change this host's roles.
    pillar = __salt__["pillar.items"](unmask=True) if pillar is None else pillar
    service = next((s for s in pillar["kolla"]["services"] if s["name"] == "mariadb"), None)
    if service is None:
        raise ValueError(f"{__opts__['id']}: mariadb is not declared for this host")
    spec = member(service)["spec"]
    return docker.from_env(timeout=120), ContainerSpec.from_dict(dict(spec), where=f"spec of {spec['name']}")


def facts():
    """{data, state: synced|standalone|joining|down, grastate} of this host's member."""
    from kolla_salt.operations import galera
    return galera.member_facts(*_member())


def held_facts():
    """facts() of the member the pillar this minion holds declares, with `spec`: a
    digest of its spec (kolla_salt.operations.galera.spec_digest); None without one. Part of
    kolla_container.facts: a master takes it where the pillar compiled for the host now
    declares the same member (kolla_salt.roads.master.pillar_summary), instead of asking
    facts(), whose fresh pillar costs a round trip to the master. None when it cannot
    say: facts() is asked then."""
    from kolla_salt.operations import galera
    held = dict(__pillar__)
    service = next((s for s in (held.get("kolla") or {}).get("services", ()) if s["name"] == "mariadb"), None)
    if service is None:
        return None
    try:
        return {**galera.member_facts(*_member(held)), "spec": galera.spec_digest(service)}
    except Exception:  # noqa: BLE001 - the preflight then asks facts(), which says what fails
        return None


def mark_bootstrap(on=True):
    """Its next start founds the cluster (on=False: removes that mark)."""
    from kolla_salt.operations import galera
    return galera.mark_bootstrap(*_member(), on=on)


def stop():
    """Stops the member; True when it was running."""
    from kolla_salt.operations import galera
    return galera.stop(*_member())


def position():
    """{data, uuid, seqno}: the member's last committed position (the member stopped)."""
    from kolla_salt.operations import galera
    return galera.position(*_member())


def clear():
    """Empties this stopped member's datadir: it joins by a full state transfer (a
    restore on another member, salt/_runners/kolla_galera.py)."""
    from kolla_salt.operations import galera
    return galera.clear_datadir(*_member())
