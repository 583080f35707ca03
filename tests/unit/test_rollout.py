"""Which hosts a master's walk visits after its prediction (kolla_salt.rollout)."""
from kolla_salt.rollout import ask, describe, hosts_to_visit


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
