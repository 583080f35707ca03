"""State module: kolla_container.deployable / nothing_kept_in_use / running / job /
only_declared.

Reads the current state, reports the exact changes, honours test=True by
predicting without acting, and fails (result False, no changes) with a message
that names the container when anything goes wrong.
"""
from kolla_salt.containers.manager import kept_in_use
from kolla_salt.errors import KollaError
from kolla_salt.roads.master import pillar_summary

DONE = {"create": "created", "recreate": "recreated", "start": "started", "none": "up to date",
        "recover": "recovered"}


def _ret(name):
    return {"name": name, "result": False, "changes": {}, "comment": ""}


def running(name, spec, pin=None):
    """A container built from `spec` runs under `name` and passes its health check;
    with `pin` (pins.yml, written by rollback), the one recorded as that generation."""
    ret = _ret(name)
    spec = dict(spec, name=name)
    try:
        plan = __salt__["kolla_container.plan"](spec, pin)
        held = f"; held at generation {pin} by pins.yml" if pin is not None else ""
        if plan["action"] == "none":
            ret.update(result=True, comment=f"{name} is up to date (generation {plan['generation']}){held}")
            return ret
        changes = dict(plan["changes"], generation=plan["generation"])
        notes = "; ".join(plan["notes"])
        if __opts__["test"]:
            ret.update(result=None, changes=changes,
                       comment=f"{name} would be {DONE[plan['action']]} as generation {plan['generation']}"
                               + (f"; {notes}" if notes else ""))
            return ret
        done = __salt__["kolla_container.ensure"](spec, pin)
        notes = "; ".join(done["notes"])
        ret.update(result=True, changes=dict(plan["changes"], generation=done["generation"]),
                   comment=f"{name} {DONE[done['action']]}, generation {done['generation']} is healthy{held}"
                           + (f"; {notes}" if notes else ""))
    except KollaError as error:
        ret["comment"] = str(error)
    return ret


def job(name, spec):
    """A one-shot container ran to success with this spec, image and config.

    It runs again only when one of them changed (for example a new image that
    brings schema migrations); a non-zero exit fails the state with its output.
    """
    ret = _ret(name)
    spec = dict(spec, name=name)
    try:
        if not __salt__["kolla_container.job_pending"](spec):
            ret.update(result=True, comment=f"job {name} already succeeded with this spec, image and config")
            return ret
        if __opts__["test"]:
            ret.update(result=None, changes={"job": f"would run {name}"}, comment=f"job {name} would run")
            return ret
        __salt__["kolla_container.run_job"](spec)
        ret.update(result=True, changes={"job": f"ran {name}"}, comment=f"job {name} succeeded")
    except KollaError as error:
        ret["comment"] = str(error)
    return ret


def deployable(name, services=None, allow_release_jump=False):
    """A deploy of `services` (all declared here when empty) may start on this host:
    kolla.deploy's first state, failing the run before anything changes (and a
    master's prediction, before its walk). Its comment: a line per problem, or what
    the checks noted (a release jump allowed, a warning); `declared`: what the pillar
    of the run says of itself (kolla_salt.roads.master.pillar_summary), read by a master's
    prediction."""
    ret = _ret(name)
    try:
        if "kolla" not in __pillar__:   # the operator's files do not validate (pillar/kolla.sls)
            problems, notes = __pillar__.get("kolla_problems") or ["the kolla pillar did not compile"], []
        else:
            problems, notes = __salt__["kolla_container.deploy_checks"](services, allow_release_jump)
    except KollaError as error:
        problems, notes = [str(error)], []
    ret.update(result=not problems, comment="\n".join(problems or notes))
    if "kolla" in __pillar__:
        ret["declared"] = pillar_summary(__pillar__)
    return ret


def nothing_kept_in_use(name, declared_sets):
    """No container of a set outside `declared_sets` is still in use (libvirt's
    servers): a full deploy would remove those (only_declared), so it is refused
    before it changes anything, naming what uses them."""
    ret = _ret(name)
    try:
        in_use = __salt__["kolla_container.undeclared_in_use"](declared_sets)
        ret.update(result=not in_use, comment=kept_in_use(in_use) if in_use else "")
    except KollaError as error:
        ret["comment"] = str(error)
    return ret


def only_declared(name, declared_sets):
    """No container of this deployment belongs to a set outside `declared_sets` (the
    services enabled for this host, by enable_<service> and roles): the others are
    removed, their named volumes kept (data is never removed implicitly)."""
    # A master's walk runs this SLS as a step of its own, without kolla.deploy's first states.
    refused = nothing_kept_in_use(name, declared_sets)
    if refused["result"] is False:
        return refused
    ret = _ret(name)
    whose = "of services disabled or not meant for this host"
    try:
        found = __salt__["kolla_container.undeclared"](declared_sets)
        if not found:
            ret.update(result=True, comment=f"no container {whose}")
            return ret
        if __opts__["test"]:
            ret.update(result=None, changes={"removed": found},
                       comment=f"would remove {len(found)} container(s) {whose} (volumes kept)")
            return ret
        removed = __salt__["kolla_container.remove_undeclared"](declared_sets)
        ret.update(result=True, changes={"removed": removed},
                   comment=f"removed {len(removed)} container(s) {whose} (volumes kept)")
    except KollaError as error:
        ret["comment"] = str(error)
    return ret
