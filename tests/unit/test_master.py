"""What a master compares before a change: which minions' pillars to refresh
(kolla_salt.roads.master.held_digest), and whose Galera member it must ask again."""
import json
import subprocess

import pytest
import yaml

from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.errors import KollaError, ValidationError
from kolla_salt.operations import galera
from kolla_salt.roads.master import Master, held_digest, pillar_summary, said_step
from operator_files import write_secrets


def pillar(folder, **settings):
    (folder / "globals.yml").write_text(yaml.safe_dump({"network_interface": "eth0", **settings}))
    return build_pillar(folder, minion_id="host1", interfaces={"eth0": ["198.18.0.11"]})


def test_a_minion_is_refreshed_only_when_what_it_holds_changed(tmp_path):
    write_secrets(tmp_path)
    held = pillar(tmp_path)
    digest = held_digest(held)
    assert held_digest(pillar(tmp_path)) == digest   # the same declaration: no refresh
    # What each state run compiles afresh (the services: a new template's output) and Salt's own keys.
    assert held_digest({**held, "kolla": {**held["kolla"], "services": []}, "schedule": {}}) == digest
    # What the minion uses between state runs: its health loop's beacon, its settings, the passwords it redacts.
    assert held_digest(pillar(tmp_path, health_stall_window=11)) != digest
    assert held_digest(pillar(tmp_path, enable_haproxy=False)) != digest
    write_secrets(tmp_path, value=lambda key: f"other-{key}")
    assert held_digest(pillar(tmp_path)) != digest


def mariadb(datadir_volume):
    return {"name": "mariadb", "containers": [{"spec": {"name": "mariadb", "volumes": [f"{datadir_volume}:/var/lib/mysql"]}}]}


def test_galera_is_asked_again_only_where_the_held_member_is_not_the_one_declared_now(monkeypatch):
    """A host's facts say what its member holds for the pillar the minion holds; a
    host whose member the new pillar changes is asked (kolla_galera.facts)."""
    master, asked = Master("/nonexistent"), []
    monkeypatch.setattr(master, "members", lambda service, facts: (sorted(facts), None))
    monkeypatch.setattr(master, "returns", lambda hosts, function, timeout: asked.extend(hosts) or
                        {h: {"data": True, "state": "down", "grastate": {}} for h in hosts})
    synced = {"data": True, "state": "synced", "grastate": {}}
    declared = {h: {"galera_spec": galera.spec_digest(mariadb("mariadb"))} for h in ("host1", "host2", "host3")}
    held = {**synced, "spec": galera.spec_digest(mariadb("mariadb"))}
    facts = {"host1": {"galera": held}, "host2": {"galera": held},
             "host3": {"galera": {**synced, "spec": galera.spec_digest(mariadb("other"))}}}
    master.check_galera(facts, declared)
    assert asked == ["host3"]
    # What host3 says now decides: with no member synced and data on every host, refused.
    asked.clear()
    facts = {h: {"galera": None} for h in declared}
    with pytest.raises(galera.GaleraRefused):
        master.check_galera(facts, declared)
    assert asked == ["host1", "host2", "host3"]
    # A host that holds no member yet, where the declaration's digest is not known
    # either (its prediction said nothing: another walk ran), is asked, not taken as
    # having said nothing (a KeyError once, on the lab, instead of the walk's refusal).
    asked.clear()
    facts = {"host1": {"galera": held}, "host2": {"galera": None}, "host3": {}}
    master.check_galera(facts, {"host1": declared["host1"], "host2": {}, "host3": {}})
    assert asked == ["host2", "host3"]


def test_a_declaration_a_host_cannot_compile_is_refused_naming_the_host_and_a_refresh_goes_where_due(
        tmp_path, monkeypatch):
    """What each minion's pillar says of itself (kolla_container.declaration): its
    problems, named with the host, refuse the command; a minion whose held pillar (its
    facts' digest) is not the one declared is refreshed after the change, the others
    are not."""
    write_secrets(tmp_path)
    held = pillar(tmp_path)
    (tmp_path / "master").write_text(yaml.safe_dump({"kolla_config_dir": str(tmp_path)}))
    master, said, refreshed = Master(tmp_path), {}, []
    monkeypatch.setattr(master, "returns", lambda hosts, function, timeout: said)
    monkeypatch.setattr(master, "command", lambda *args, timeout: refreshed.append(args))
    facts = {"host1": {"pillar": held_digest(held)}, "host2": {"pillar": "an older one"}}
    said.update(host1={"problems": ["globals.yml: key 'x' is wrong"]}, host2="Traceback...\nKeyError: 'kolla'")
    with pytest.raises(ValidationError) as refused:
        master.declaration(facts)
    assert refused.value.problems == ["host host1: globals.yml: key 'x' is wrong",
                                      "host host2: its salt-minion did not say what its pillar holds (KeyError: 'kolla')"]
    said.update(host1={"problems": [], **pillar_summary(held)}, host2={"problems": [], **pillar_summary(held)})
    hosts = master.declaration(facts)
    assert "keystone" in [s["name"] for s in hosts["host1"]["services"]]   # the folders' definitions
    assert master.refresh_pillars(hosts) == ["host2"]
    assert refreshed[0][:4] == ("salt", "-L", "host2", "saltutil.refresh_pillar")
    # Facts asked with `declared` (preflight's) said it already: no second Salt round,
    # and what they said decides.
    monkeypatch.setattr(master, "returns", lambda *args, **kwargs: pytest.fail("asked again"))
    facts = {host: {**found, "declared": said[host]} for host, found in facts.items()}
    assert master.declaration(facts) == hosts
    facts["host2"]["declared"] = {"problems": ["globals.yml: key 'y' is wrong"]}
    with pytest.raises(ValidationError) as refused:
        master.declaration(facts)
    assert refused.value.problems == ["host host2: globals.yml: key 'y' is wrong"]


def test_an_orchestration_returns_its_steps_past_salts_marks_and_says_what_is_no_step(monkeypatch):
    """salt-run's return marks a failed orchestration (__FAILHARD__): the failed step
    is returned as the others are. A key that is neither a mark nor a state's tag is
    said as it is, not taken for a step."""
    master = Master("/nonexistent")
    failed = {"result": False, "comment": "nova_compute on host2 failed", "__run_num__": 1}
    steps = {"salt_|-kolla-deploy-nova_|-kolla.deploy_|-state": failed, "__FAILHARD__": True,
             "salt_|-kolla-deploy-keystone_|-kolla.deploy_|-state": {"result": True, "__run_num__": 0}}

    def ran(steps):
        monkeypatch.setattr(master, "command", lambda *args, timeout: subprocess.CompletedProcess(
            args, 1, stdout=json.dumps({"data": {"master": steps}, "retcode": 1}), stderr=""))
        return master.orchestrate("kolla.deploy")

    assert ran(steps) == (False, [{"__id__": "kolla-deploy-keystone", "result": True, "__run_num__": 0},
                                  {"__id__": "kolla-deploy-nova", **failed}])
    with pytest.raises(KollaError) as stopped:
        ran({**steps, "master": "Pillar failed to render: nova needs glance"})
    assert "nova needs glance" in str(stopped.value)


def test_a_deploys_prediction_says_which_minions_hold_another_pillar_and_only_those_are_refreshed(
        tmp_path, monkeypatch):
    """A deploy through a master asks no pillar of its own: each host's prediction
    returns what its pillar says of itself in kolla.deploy's first state; a host whose
    minion holds another pillar (its facts' digest), or whose prediction said nothing,
    is refreshed, the others are not."""
    from kolla_salt.roads.master import take_what_pillars_said
    from kolla_salt.roads.statereturns import CHECKS_STATE
    write_secrets(tmp_path)
    summary = pillar_summary(pillar(tmp_path))
    master, refreshed = Master("/nonexistent"), []
    monkeypatch.setattr(master, "command", lambda *args, timeout: refreshed.append(args))
    first = f"kolla_container_|-{CHECKS_STATE}_|-{CHECKS_STATE}_|-deployable"
    predicted = {host: {first: {"result": True, "__run_num__": 0, "declared": summary}} for host in ("h1", "h2")}
    predicted["h3"] = {}
    facts = {"h1": {"pillar": summary["pillar"]}, "h2": {"pillar": "an older one"}, "h3": {"pillar": summary["pillar"]}}
    hosts = {host: {"services": []} for host in facts}
    take_what_pillars_said(hosts, facts, predicted)
    assert hosts["h1"]["galera_spec"] == summary["galera_spec"]
    assert master.refresh_pillars(hosts) == ["h2", "h3"]
    assert refreshed[0][:3] == ("salt", "-L", "h2,h3")


def test_the_hosts_that_answer_are_heard_while_one_is_down(monkeypatch):
    """`salt -t T` waits T for the minions, then the master's gather_job_timeout for
    one that does not answer, and prints nothing before: a client cut before both
    would leave every host silent (seen when one lab host was down)."""
    from kolla_salt.roads.master import GATHER_JOB_SECONDS
    master = Master("/nonexistent")

    def salt(*args, timeout):   # what `timeout N salt ... -t T` prints
        waits = int(args[args.index("-t") + 1]) + GATHER_JOB_SECONDS
        said = {"host1": {"code": "x"}, "host3": "Minion did not return. [Not connected]"}
        return subprocess.CompletedProcess(args, 124 if timeout <= waits else 1,
                                           stdout="" if timeout <= waits else json.dumps(said), stderr="")
    monkeypatch.setattr(master, "command", salt)
    assert master.returns("*", "kolla_container.facts", timeout=10) == {"host1": {"code": "x"}}


def test_a_restore_orchestration_says_each_step_and_the_deploy_it_runs_as_its_own(monkeypatch):
    """kolla.rollback_release's steps: the backup and the restore say what they did
    (the runners' notes); the deploy it runs as an orchestration of its own is said
    step by step, host by host, after them; a runner that failed fails the run, its
    error said, and the steps after it never ran."""
    master = Master("/nonexistent")
    backup = {"result": True, "__run_num__": 0, "changes": {"return": {
        "note": "host3: backup 20261207T1 (3 MiB in 4 s; before restoring 20261205T1 (kolla-salt rollback))"}}}
    walk = {"data": {"master": {
        "salt_|-kolla-deploy-predicted_|-kolla_rollout.note_|-runner": {
            "result": True, "__run_num__": 0, "changes": {"return": {"note": "predicted changes in keystone (host1)"}}},
        "salt_|-kolla-deploy-keystone_|-kolla.keystone_|-state": {
            "result": True, "__run_num__": 1, "changes": {"ret": {"host1": {"keystone": {"result": True}}}}}}},
        "retcode": 0}
    steps = {"salt_|-kolla-rollback-backup_|-kolla_galera.backup_|-runner": backup,
             "salt_|-kolla-rollback-restore_|-kolla_galera.restore_|-runner": {
                 "result": True, "__run_num__": 1, "changes": {"return": {"note": "the members hold backup 20261205T1"}}},
             "salt_|-kolla-rollback-deploy_|-state.orchestrate_|-runner": {
                 "result": True, "__run_num__": 2, "changes": {"return": walk}}}

    def ran(steps, code=0):
        monkeypatch.setattr(master, "command", lambda *args, timeout: subprocess.CompletedProcess(
            args, code, stdout=json.dumps({"data": {"master": steps}, "retcode": code}), stderr=""))
        ok, found = master.orchestrate("kolla.rollback_release")
        return ok, [said_step(step) for step in found]

    ok, said = ran(steps)
    assert ok and [step["timing"].split(":")[0] for step in said] == [
        "kolla-rollback-backup", "kolla-rollback-restore", "kolla-rollback-deploy", "kolla-deploy-predicted",
        "kolla-deploy-keystone"]
    assert said[0]["note"].startswith("host3: backup 20261207T1") and said[1]["note"].endswith("backup 20261205T1")
    assert said[4]["hosts"] == {"host1": {"keystone": {"result": True}}}
    failed = {"result": False, "__run_num__": 1, "comment": "Runner function 'kolla_galera.restore' failed.",
              "changes": {"return": {"error": "mariadb-restore on host3: no space left; the members are stopped"}}}
    ok, said = ran({**{k: v for k, v in steps.items() if "deploy" not in k},
                    "salt_|-kolla-rollback-restore_|-kolla_galera.restore_|-runner": failed, "__FAILHARD__": True}, 1)
    assert not ok and len(said) == 2
    assert said[1]["failure"] == ("kolla-rollback-restore: mariadb-restore on host3: no space left; the members are "
                                  "stopped")


def test_a_deploy_through_a_master_that_changes_nothing_is_answered_by_the_prediction_without_a_walk(monkeypatch):
    """Every host's prediction is the whole answer when no host would change anything;
    one that refuses stops the deploy before any walk, naming the host."""
    from kolla_salt.roads.statereturns import CHECKS_STATE
    master, walks = Master("/nonexistent", out=lambda line: None), []
    monkeypatch.setattr(master, "orchestrate", lambda *args, **kwargs: walks.append(args) or (True, []))
    checks = f"kolla_container_|-{CHECKS_STATE}_|-{CHECKS_STATE}_|-deployable"
    unchanged = {checks: {"result": True, "comment": "", "changes": {}, "__run_num__": 0}}
    monkeypatch.setattr(master, "predict", lambda hosts, pillar: {host: unchanged for host in hosts})
    hosts = {"h1": {"services": []}, "h2": {"services": []}}
    ok, steps = master.converge("deploy", {"kolla_services": ["keystone"]}, hosts=hosts, facts={}, predict=True)
    assert ok and steps == [{"hosts": {"h1": unchanged, "h2": unchanged}}] and walks == []
    refusing = {checks: {"result": False, "comment": "keystone: image x is not on this host", "__run_num__": 0}}
    monkeypatch.setattr(master, "predict", lambda hosts, pillar: {"h1": unchanged, "h2": refusing})
    with pytest.raises(ValidationError) as refusal:
        master.converge("deploy", {}, hosts=hosts, facts={}, predict=True)
    assert refusal.value.problems == ["h2: keystone: image x is not on this host"] and walks == []


def test_a_compute_drain_through_a_master_says_the_runners_lines_and_a_refusal_stays_bad_input(monkeypatch):
    """kolla.compute's runner speaks to the cloud from the master: what it did is
    said; servers that fit nowhere are a refusal (exit 2, nothing changed), a failed
    migration an error."""
    lines = []
    master = Master("/nonexistent", out=lines.append)

    def answer(returned, result=True):
        step = {"salt_|-kolla-compute-drain_|-kolla_compute.drain_|-runner": {
            "result": result, "__run_num__": 0, "changes": {"return": returned}}}
        monkeypatch.setattr(master, "command", lambda *args, timeout: subprocess.CompletedProcess(
            args, 0 if result else 1, stdout=json.dumps({"data": {"master": step}, "retcode": 0 if result else 1}),
            stderr=""))

    answer({"note": "[compute drain] host2: 1 server(s) to move to host3\n[compute drain] host2: drained in 9.0 s"})
    master.compute("drain", "host2", 600)
    assert lines[-1].endswith("host2: drained in 9.0 s")
    answer({"error": "compute drain host3: these servers fit on no other compute host (none is enabled and up): a",
            "note": "", "refused": True}, result=False)
    with pytest.raises(ValidationError, match="fit on no other compute host"):
        master.compute("drain", "host3", 600)
    answer({"error": "compute drain host2: the live migration of a failed", "note": "", "refused": False}, False)
    with pytest.raises(KollaError, match="live migration of a failed") as failed:
        master.compute("drain", "host2", 600)
    assert not isinstance(failed.value, ValidationError)
