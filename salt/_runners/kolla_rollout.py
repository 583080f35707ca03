"""Runner: the pauses of a rollout across hosts (kolla/orchestrate.jinja).

    salt-run kolla_rollout.pause SECONDS [reason=TEXT]

A step between two batches of a host-by-host rollout, for a service whose
clients need time before the next member goes (memcached's `pause_between_hosts`).
It prints nothing: the orchestration's output is JSON that kolla-salt reads. Its
return's "note" is printed by kolla-salt."""
import time


def pause(seconds, reason=""):
    time.sleep(float(seconds))
    return {"note": f"waited {float(seconds):g} s" + (f": {reason}" if reason else "")}
