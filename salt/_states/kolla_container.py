"""State module: kolla_container.running / job.

Reads the current state, reports the exact changes, honours test=True by
predicting without acting, and fails (result False, no changes) with a message
that names the container when anything goes wrong.
"""
from kolla_salt.errors import KollaError


def _ret(name):
    return {"name": name, "result": False, "changes": {}, "comment": ""}


def running(name, spec):
    """A container built from `spec` runs under `name` and passes its health check."""
    ret = _ret(name)
    spec = dict(spec, name=name)
    try:
        plan = __salt__["kolla_container.plan"](spec)
        if plan["action"] == "none":
            ret.update(result=True, comment=f"{name} is up to date (generation {plan['generation']})")
            return ret
        changes = dict(plan["changes"], generation=plan["generation"])
        notes = "; ".join(plan["notes"])
        if __opts__["test"]:
            ret.update(result=None, changes=changes,
                       comment=f"{name} would be {plan['action']}d as generation {plan['generation']}"
                               + (f"; {notes}" if notes else ""))
            return ret
        __salt__["kolla_container.ensure"](spec)
        ret.update(result=True, changes=changes,
                   comment=f"{name} {plan['action']}d, generation {plan['generation']} is healthy"
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
