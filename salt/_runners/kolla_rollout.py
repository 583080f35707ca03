"""Runner: what a walk of the container-set tree across hosts needs beside its
state runs (kolla/orchestrate.jinja).

    salt-run kolla_rollout.walk PLACEMENT [services=LIST] [batch=N] [allow_release_jump=WHY]
    salt-run kolla_rollout.hosts TARGET
    salt-run kolla_rollout.note TEXT
    salt-run kolla_rollout.refuse TEXT
    salt-run kolla_rollout.pause SECONDS [reason=TEXT]

`walk`, called while a real walk is rendered: refuses a second walk of this master
while one runs, predicts (kolla.deploy under test=True on every host PLACEMENT
places a service on, at once) and returns the walk's steps (kolla_salt.roads.rollout.walk).
`hosts`: the hosts of a compound target, in the order a walk visits them (the
Galera runner's members too).
`note`, the walk's first step: says what the prediction found. `refuse`, the only
step of a walk refused (another one runs): fails, saying why. `pause`, a step
between two batches of a host-by-host rollout, for a service whose clients need
time before the next member goes (memcached's `pause_between_hosts`). They print
nothing: the orchestration's output is JSON that kolla-salt reads. A return's "note"
is printed by kolla-salt."""
import os
import time

from kolla_salt.roads import rollout
from kolla_salt.roads.rollout import ask, describe, hosts_to_visit


def walk(placement, services=None, batch=None, allow_release_jump=None):
    """The steps of a real walk (kolla_salt.roads.rollout.walk) from its prediction. While
    it runs no other walk of this master starts: the steps of a deploy run as
    concurrent state runs, which Salt no longer keeps apart from another walk's (whose
    job could remove this one's running job container)."""
    try:
        rollout.hold_walk_lock(os.path.join(__opts__["cachedir"], "kolla-walk.lock"))
    except rollout.WalkInProgress as refused:
        return rollout.refusal(str(refused))
    placed = {f"kolla.{step['service']}": hosts(step["target"]) for step in placement}
    final = [step["target"] for step in placement if step.get("final")]
    if final:   # the jobs that wait for every service (salt/states/kolla/final.sls)
        placed["kolla.final"] = hosts(" or ".join(final))
    if not services:   # a full walk also removes, on every host, what is not declared for it
        placed["kolla.undeclared"] = hosts("*")
    predicted = _predict(placed, services, allow_release_jump)
    return rollout.walk(placement, predicted["visit"], predicted["note"], batch=batch, undeclared=not services)


def hosts(target):
    """The accepted minions a compound target matches, sorted by id: every operator
    sees the same order."""
    import salt.utils.minions
    return sorted(salt.utils.minions.CkMinions(__opts__).check_minions(target, "compound")["minions"])


def _predict(placed, services=None, allow_release_jump=None):
    """{"visit": {sls: [hosts]}, "note": what was found}. Without a prediction (an
    error here) every host is visited: the walk then says what fails.
    `allow_release_jump`: why the hosts' checks let releases jump (a release rollback's)."""
    import salt.client
    hosts = sorted({host for members in placed.values() for host in members})
    pillar = {**({"kolla_services": services} if services else {}),
              **({"kolla_allow_release_jump": allow_release_jump} if allow_release_jump else {})}
    kwarg = {"test": True, **({"pillar": pillar} if pillar else {})}
    try:
        predicted = ask(salt.client.get_local_client(mopts=__opts__), hosts, "state.sls", ["kolla.deploy"],
                        kwarg=kwarg, timeout=300)
    except Exception as error:  # reported in the walk's first step
        return {"visit": placed, "note": f"no prediction ({type(error).__name__}: {error}): every set is visited"}
    visit = hosts_to_visit(predicted, placed)
    return {"visit": visit, "note": describe(visit)}


def note(text):
    return {"note": text}


def refuse(text):
    """A walk's only step when it must not run: fails, saying why."""
    __context__["retcode"] = 1
    return {"error": text}


def pause(seconds, reason=""):
    time.sleep(float(seconds))
    return {"note": f"waited {float(seconds):g} s" + (f": {reason}" if reason else "")}
