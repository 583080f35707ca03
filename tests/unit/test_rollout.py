"""What a master's walk does after its prediction (kolla_salt.roads.rollout): which hosts it
visits, in which steps, what waits for what, and that one walk runs at a time."""
import subprocess
import sys

import pytest

from kolla_salt.declaration.tree import waits
from kolla_salt.roads.rollout import WalkInProgress, ask, changing_hosts, describe, hold_walk_lock, hosts_to_visit, walk


def state(sls, result=True, changes=None):
    return {"__sls__": sls, "result": result, "changes": changes or {}, "comment": ""}


PLACED = {"kolla.mariadb": ["host1", "host2", "host3"], "kolla.keystone": ["host1", "host2", "host3"],
          "kolla.memcached": ["host1", "host2", "host3", "host4"], "kolla.undeclared": ["host1", "host2", "host3",
                                                                                         "host4"]}


def test_a_set_is_visited_only_where_its_prediction_changes_something_or_fails():
    predicted = {
        "host1": {"a": state("kolla.mariadb"), "b": state("kolla.keystone", None, {"image": "a -> b"})},
        "host2": {"a": state("kolla.mariadb", False), "b": state("kolla.keystone")},   # a failed prediction
        # A job that would run reports result None; a removal of an undeclared container, changes.
        "host3": {"a": state("kolla.keystone", None), "b": state("kolla.undeclared", True, {"removed": ["x"]})},
        "host4": ["Rendering SLS 'base:kolla.memcached' failed: ..."],   # no state returns: a real run says why
    }
    assert hosts_to_visit(predicted, PLACED) == {
        "kolla.mariadb": ["host2"], "kolla.keystone": ["host1", "host3"], "kolla.memcached": ["host4"],
        "kolla.undeclared": ["host3", "host4"]}


def test_a_host_without_a_prediction_is_visited_for_every_set_it_runs():
    visit = hosts_to_visit({"host1": {"a": state("kolla.keystone")}}, PLACED)
    assert visit["kolla.keystone"] == ["host2", "host3"] and visit["kolla.memcached"] == ["host2", "host3", "host4"]


def test_a_deploy_needs_no_walk_only_when_every_host_predicts_no_change_and_no_failure():
    """A deploy through a master skips its walk when its preflight's prediction names no host."""
    quiet = {"a": state("kolla.mariadb"), "b": state("kolla.keystone")}
    assert changing_hosts({"host1": quiet, "host2": quiet}) == []
    assert changing_hosts({"host1": quiet, "host2": {"a": state("kolla.keystone", None, {"image": "a -> b"})},
                           "host3": {"a": state("kolla.mariadb", False)},
                           "host4": ["The function \"state.sls\" is running as PID 42"]}) == ["host2", "host3", "host4"]


def test_the_operator_reads_what_is_visited_and_what_is_not():
    assert describe({"kolla.keystone": [], "kolla.undeclared": []}) == \
        "predicted: nothing to change on any host; no set visited"
    assert describe({"kolla.mariadb": [], "kolla.keystone": ["host1", "host3"], "kolla.undeclared": ["host3"]}) == (
        "predicted changes in keystone (host1, host3), the removal of undeclared containers (host3); "
        "nothing to change in mariadb: not visited")


class Client:
    """A LocalClient that loses the return of some hosts the first time it asks."""
    def __init__(self, late):
        self.late, self.asked = set(late), []

    def cmd(self, hosts, function, args, tgt_type, timeout, full_return, kwarg):
        self.asked.append(list(hosts))
        answers = {h: f"{function} on {h}" for h in hosts if h not in self.late}
        self.late.clear()
        return answers


def test_hosts_whose_return_was_lost_are_asked_again_and_only_they():
    client = Client(late=["host2"])
    assert ask(client, ["host1", "host2"], "test.ping") == {"host1": "test.ping on host1", "host2": "test.ping on host2"}
    assert client.asked == [["host1", "host2"], ["host2"]]


HOSTS = ["host1", "host2", "host3"]
SERVICES = {"cron": {}, "haproxy": {}, "mariadb": {"rollout": "kolla_galera.converge"}, "rabbitmq": {"serial": True},
            "memcached": {"pause": 10}, "keystone": {"serial": True}}


def placement():
    after = waits(list(SERVICES))   # from the tree, as kolla_salt.declaration.roles.placement gives it
    return [{"service": s, "target": "*", "rollout": None, "serial": False, "pause": 0, **SERVICES[s], "after": after[s]}
            for s in SERVICES]


def shape(steps):
    return {step["name"]: (step.get("hosts"), step.get("require"), step.get("parallel")) for step in steps}


def test_a_deploy_starts_a_step_once_what_it_waits_for_is_done_and_runs_the_others_beside_it():
    visit = {**{f"kolla.{s}": HOSTS for s in SERVICES}, "kolla.cron": [], "kolla.undeclared": ["host3"]}
    steps = walk(placement(), visit, "the note")
    assert steps[0] == {"name": "predicted", "runner": "kolla_rollout.note", "args": {"text": "the note"}, "require": [],
                        "parallel": False}
    assert shape(steps[1:]) == {
        "haproxy": (HOSTS, [], True),
        # Galera's runner gets every member (it decides from all of them), beside the others' state runs
        "mariadb": (None, ["haproxy"], True),
        "rabbitmq-on-host1": (["host1"], ["haproxy"], True),   # beside the database, a node at a time
        "rabbitmq-on-host2": (["host2"], ["rabbitmq-on-host1"], True),
        "rabbitmq-on-host3": (["host3"], ["rabbitmq-on-host2"], True),
        "memcached": (HOSTS, ["haproxy"], True),   # no pause outside an upgrade
        # keystone needs the database and memcached, not RabbitMQ
        "keystone-on-host1": (["host1"], ["haproxy", "mariadb", "memcached"], True),
        "keystone-on-host2": (["host2"], ["keystone-on-host1"], True),
        "keystone-on-host3": (["host3"], ["keystone-on-host2"], True),
        # last, once every branch ended
        "only-declared": (["host3"], ["haproxy", "keystone-on-host3", "mariadb", "memcached", "rabbitmq-on-host3"],
                          False)}
    assert steps[2]["args"] == {"target": "*", "concurrent": True}


def test_a_service_joins_the_group_before_it_in_a_deploy_only_if_it_waits_for_nothing_more():
    visit = {"kolla.rabbitmq": ["host1"], "kolla.keystone": ["host1"], "kolla.undeclared": []}
    assert shape(walk(placement(), visit, "")[1:]) == {"rabbitmq-on-host1": (["host1"], [], True),
                                                      "keystone-on-host1": (["host1"], [], True)}
    # in an upgrade every step waits for the one before anyway: one state run
    assert [s["name"] for s in walk(placement(), visit, "", batch=1)[1:]] == ["rabbitmq-keystone-on-host1"]


def test_a_deploy_waits_only_for_the_steps_it_visits():
    visit = {"kolla.keystone": ["host2"], "kolla.memcached": ["host1"], "kolla.undeclared": []}
    assert shape(walk(placement(), visit, "")[1:]) == {"memcached": (["host1"], [], True),
                                                      "keystone-on-host2": (["host2"], ["memcached"], True)}


def test_an_upgrade_goes_a_batch_at_a_time_each_step_after_the_one_before_and_pauses_where_asked():
    visit = {"kolla.memcached": HOSTS, "kolla.keystone": ["host1", "host2"], "kolla.undeclared": HOSTS}
    steps = walk([p for p in placement() if p["service"] in ("memcached", "keystone")], visit, "", batch=2,
                 undeclared=False)
    assert [(s["name"], s.get("require"), s.get("onchanges"), s.get("parallel")) for s in steps[1:]] == [
        ("memcached-on-host1-host2", ["predicted"], None, False),
        ("memcached-on-host1-host2-pause", None, ["memcached-on-host1-host2"], False),
        ("memcached-on-host3", ["memcached-on-host1-host2-pause"], None, False),   # no pause after the last batch
        ("keystone-on-host1", ["memcached-on-host3"], None, False),   # serial: a host at a time whatever the batch
        ("keystone-on-host2", ["keystone-on-host1"], None, False)]
    assert steps[2]["args"]["seconds"] == 10


def test_a_second_walk_is_refused_while_one_runs_and_not_after_it_ended(tmp_path):
    lock = tmp_path / "kolla-walk.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"from kolla_salt.roads.rollout import hold_walk_lock; hold_walk_lock({str(lock)!r}); "
                               "print('held', flush=True); input()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(WalkInProgress, match=f"another walk of this master is running \\(salt-run, pid {holder.pid}\\)"):
            hold_walk_lock(str(lock))
    finally:
        holder.communicate(input="\n", timeout=30)
    hold_walk_lock(str(lock))   # the holder ended (even killed: the kernel let its lock go)
    hold_walk_lock(str(lock))   # this walk, rendered again


def test_the_jobs_after_every_service_come_once_every_step_is_done_even_in_an_upgrade_of_some_services():
    """nova's online data migrations (kolla.final) wait for every host's steps; an
    upgrade limited to some services runs them too, but removes nothing undeclared."""
    visit = {"kolla.memcached": HOSTS, "kolla.keystone": ["host1"], "kolla.final": ["host1"],
             "kolla.undeclared": ["host3"]}
    placed = [p for p in placement() if p["service"] in ("memcached", "keystone")]
    deploy = shape(walk(placed, visit, "")[1:])
    assert list(deploy)[-2:] == ["final-jobs", "only-declared"]
    assert deploy["final-jobs"] == (["host1"], ["keystone-on-host1", "memcached"], False)
    upgrade = walk(placed, visit, "", batch=1, undeclared=False)
    assert [(s["name"], s["require"]) for s in upgrade[-2:]] == [("keystone-on-host1", ["memcached-on-host3"]),
                                                                 ("final-jobs", ["keystone-on-host1"])]
