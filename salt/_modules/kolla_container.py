"""Execution module: managed containers. A thin adapter over kolla_salt.containers;
settings (state folder, health timeout, generations kept) and the secrets to
redact from any output come from the `kolla` pillar."""
import sys

from kolla_salt.containers import ContainerManager
from kolla_salt.spec import ContainerSpec

__virtualname__ = "kolla_container"


def __virtual__():
    return __virtualname__


def _manager():
    kolla = __pillar__["kolla"]

    def progress(message):  # shows up on salt-call's terminal while a long state runs
        print(f"[kolla] {message}", file=sys.stderr, flush=True)

    return ContainerManager.from_settings(kolla["settings"], kolla["passwords"].values(), out=progress)


def _spec(spec, where):
    return ContainerSpec.from_dict(dict(spec), where=where)


def plan(spec):
    """What `ensure` would do: {name, action, changes, generation, notes}."""
    result = _manager().plan(_spec(spec, f"spec of {spec.get('name')}"))
    return vars(result)


def ensure(spec):
    """Converges one container to its spec (atomic swap when it must change)."""
    return vars(_manager().ensure(_spec(spec, f"spec of {spec.get('name')}")))


def job_pending(spec):
    return _manager().job_pending(_spec(spec, f"job {spec.get('name')}"))


def run_job(spec):
    """Runs a one-shot container to completion; returns its (redacted) output."""
    return _manager().run_job(_spec(spec, f"job {spec.get('name')}"))

