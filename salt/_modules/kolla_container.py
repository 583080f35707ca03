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
    kolla = __pillar__.get("kolla", {})
    settings = kolla.get("settings", {})

    def progress(message):  # shows up on salt-call's terminal while a long state runs
        print(f"[kolla] {message}", file=sys.stderr, flush=True)

    return ContainerManager(
        state_dir=settings.get("kolla_state_directory", "/var/lib/kolla-salt"),
        health_timeout=settings.get("container_health_timeout", 180),
        generations_kept=settings.get("generations_kept", 2),
        secrets=list(kolla.get("passwords", {}).values()), out=progress)


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


def remove(name, kept_too=True):
    """Removes a managed container and its kept generations; volumes stay."""
    return _manager().remove(name, kept_too=kept_too)


def rollback(name):
    """Returns a container to its last known good generation."""
    target, new = _manager().rollback(name)
    return {"name": name, "restored_generation": target, "generation": new}


def exists(name):
    return _manager().get(name) is not None
