"""Execution module: this host's haproxy, for a blue/green swap on another host
(published through the master: its `peer` setting allows kolla_balancer.* between
minions). A thin adapter over kolla_salt.balancer.Runtime."""
__virtualname__ = "kolla_balancer"


def __virtual__():
    return __virtualname__


def _runtime():
    from kolla_salt.balancer import Runtime
    settings = __pillar__["kolla"]["settings"]
    runtime = Runtime(settings["haproxy_runtime_directory"]) if settings.get("enable_haproxy") else None
    return runtime if runtime is not None and runtime.available() else None


def _act(action, backend, server, timeout):
    from kolla_salt.balancer import DONE, NOT_HERE
    runtime = _runtime()
    if runtime is None:
        return NOT_HERE
    getattr(runtime, action)(backend, server, int(timeout))
    return DONE


def take_traffic(backend, server, timeout):
    """The server gets requests in this host's haproxy once its check finds it up."""
    return _act("take_traffic", backend, server, timeout)


def drain(backend, server, timeout):
    """No new session goes to the server here; those it has go on."""
    return _act("drain", backend, server, timeout)


def wait_drained(backend, server, timeout):
    """Returns once the server has no session here (timeout: seconds)."""
    return _act("wait_drained", backend, server, timeout)
