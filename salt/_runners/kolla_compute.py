"""Runner: a compute host emptied of its servers or taking them again
(kolla_salt.operations.compute), the steps of the orchestration kolla.compute (what
`kolla-salt compute` runs through a master). It speaks to the cloud from the master
as its admin, with the operator folder's clouds.yaml.

    salt-run kolla_compute.drain HOST [timeout=600]
    salt-run kolla_compute.undrain HOST

Each returns {"note": what it did, a line per step}, or {"error": why not, "note":
what it did before, "refused": true when nothing changed (bad input: the servers
fit nowhere, no such host)} with the runner's retcode set; nothing is printed (the
orchestration's output is JSON that kolla-salt reads)."""


def _acted(action, host, **options):
    from kolla_salt.errors import KollaError, ValidationError
    from kolla_salt.operations.compute import Compute, connect
    said = []
    try:
        getattr(Compute(connect(__opts__["kolla_config_dir"]), out=said.append), action)(host, **options)
    except KollaError as failed:
        __context__["retcode"] = 1
        return {"error": str(failed), "note": "\n".join(said), "refused": isinstance(failed, ValidationError)}
    return {"note": "\n".join(said)}


def drain(host, timeout=600):
    return _acted("drain", host, timeout=float(timeout))


def undrain(host):
    return _acted("undrain", host)
