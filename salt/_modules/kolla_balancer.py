"""Execution module: this host's haproxy, for a blue/green swap on another host
(published through the master: its `peer` setting allows kolla_balancer.* between
minions). A thin adapter over kolla_salt.containers.balancer.Runtime. The caller names the
runtime folder (a setting alike on every host): this minion's own pillar may be
older than the deploy that calls it (a first deploy refreshes it at its end)."""
__virtualname__ = "kolla_balancer"


def __virtual__():
    return __virtualname__


def _act(action, backend, server, timeout, runtime_directory):
    from kolla_salt.containers.balancer import DONE, NOT_HERE, Runtime
    runtime = Runtime(runtime_directory)
    if not runtime.available():   # no haproxy runs here
        return NOT_HERE
    getattr(runtime, action)(backend, server, int(timeout))
    return DONE


def take_traffic(backend, server, timeout, runtime_directory):
    """The server gets requests in this host's haproxy once its check finds it up."""
    return _act("take_traffic", backend, server, timeout, runtime_directory)


def drain(backend, server, timeout, runtime_directory):
    """No new session goes to the server here; those it has go on."""
    return _act("drain", backend, server, timeout, runtime_directory)


def wait_drained(backend, server, timeout, runtime_directory):
    """Returns once the server has no session here (timeout: seconds)."""
    return _act("wait_drained", backend, server, timeout, runtime_directory)
