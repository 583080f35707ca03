"""Runner: what a walk of the container-set tree across hosts needs beside its
state runs (kolla/orchestrate.jinja).

    salt-run kolla_rollout.predict PLACED [services=LIST]
    salt-run kolla_rollout.note TEXT
    salt-run kolla_rollout.pause SECONDS [reason=TEXT]

`predict`, called while the walk is rendered: kolla.deploy under test=True on every
host of PLACED ({sls: [hosts]}) at once, and for each SLS the hosts where it would
change something (kolla_salt.rollout). `note`, the walk's first step: says what
the prediction found. `pause`, a step between two batches of a host-by-host rollout,
for a service whose clients need time before the next member goes (memcached's
`pause_between_hosts`). They print nothing: the orchestration's output is JSON that
kolla-salt reads. A return's "note" is printed by kolla-salt."""
import time

from kolla_salt.rollout import ask, describe, hosts_to_visit


def predict(placed, services=None):
    """{"visit": {sls: [hosts]}, "note": what was found}. Without a prediction (an
    error here) every host is visited: the walk then says what fails."""
    import salt.client
    hosts = sorted({host for members in placed.values() for host in members})
    kwarg = {"test": True, **({"pillar": {"kolla_services": services}} if services else {})}
    try:
        predicted = ask(salt.client.get_local_client(mopts=__opts__), hosts, "state.sls", ["kolla.deploy"],
                        kwarg=kwarg, timeout=300)
    except Exception as error:  # reported in the walk's first step
        return {"visit": placed, "note": f"no prediction ({type(error).__name__}: {error}): every set is visited"}
    visit = hosts_to_visit(predicted, placed)
    return {"visit": visit, "note": describe(visit)}


def note(text):
    return {"note": text}


def pause(seconds, reason=""):
    time.sleep(float(seconds))
    return {"note": f"waited {float(seconds):g} s" + (f": {reason}" if reason else "")}
