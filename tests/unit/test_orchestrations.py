"""The orchestrate SLSs a master runs (salt/states/kolla/*.sls), rendered with
Jinja as Salt renders them (its `do` extension and `json` filter; pillar, salt and
opts as globals), the runners answered here: which steps they run, in which order,
with which pillar. The lab's tests run them for real (tests/integration/test_lab.py)."""
import json

import jinja2
import pytest
import yaml

from kolla_salt import paths

PLACEMENT = [{"service": "mariadb", "target": "host1 or host2 or host3", "database": True},
             {"service": "keystone", "target": "host1 or host2 or host3", "database": False}]


def rendered(sls, pillar, runners):
    """{step id: (its function, {argument: value})} of SLS, in order."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.REPO / "salt" / "states")),
                             extensions=["jinja2.ext.do"], undefined=jinja2.StrictUndefined)
    env.filters["json"] = json.dumps
    env.globals.update(pillar={"kolla": {"placement": PLACEMENT}, **pillar}, opts={},
                       salt={"saltutil.runner": lambda name, **kwargs: runners[name](**kwargs)})
    steps = yaml.safe_load(env.get_template(f"kolla/{sls}.sls").render())
    return {step: (function, {k: v for arg in args for k, v in arg.items()})
            for step, found in steps.items() for function, args in found.items()}


def test_a_release_rollback_backs_up_restores_then_walks_the_deploy_rendered_after_the_restore():
    """Without a plan in its pillar the runner chooses it; the database's placement is
    the backup's and the restore's target; the deploy is an orchestration of its own
    (rendered once the restore ran), allowed to take releases back."""
    plan = {"host": "host3", "backup": "20261207T1", "first": ["nova_compute"]}
    steps = rendered("rollback_release", {"kolla_release": "2026.1"},
                     {"kolla_galera.rollback_plan": lambda release: plan if release == "2026.1" else None})
    assert list(steps) == ["kolla-rollback-backup", "kolla-rollback-restore", "kolla-rollback-deploy"]
    function, backup = steps["kolla-rollback-backup"]
    assert function == "salt.runner" and backup["name"] == "kolla_galera.backup"
    assert backup["target"] == "host1 or host2 or host3" and "before restoring 20261207T1" in backup["why"]
    assert steps["kolla-rollback-restore"][1] == {"name": "kolla_galera.restore", "target": "host1 or host2 or host3",
                                                  "host": "host3", "backup": "20261207T1",
                                                  "first": ["nova_compute"], "failhard": True}
    assert steps["kolla-rollback-deploy"][1] == {
        "name": "state.orchestrate", "mods": "kolla.deploy", "failhard": True,
        "pillar": {"kolla_allow_release_jump": "the database went back to backup 20261207T1"}}


@pytest.mark.parametrize("sls, pillar, runners", [
    ("rollback_release", {"kolla_release": "2026.1"},
     {"kolla_galera.rollback_plan": lambda release: {"error": "no backup was taken under 2026.1"}}),
    ("rollback_release", {}, {}),
])
def test_a_release_rollback_without_a_plan_is_one_refusal_and_nothing_else(sls, pillar, runners):
    steps = rendered(sls, pillar, runners)
    assert list(steps) == ["kolla-rollback-refused"]
    assert steps["kolla-rollback-refused"][1]["name"] == "kolla_rollout.refuse"


def test_a_key_rotation_rotates_then_walks_the_deploy_of_those_services_only():
    steps = rendered("rotate_keys", {}, {"kolla_keys.rotating": lambda: ["keystone"]})
    assert list(steps) == ["kolla-rotate-keys-rotate", "kolla-rotate-keys-deploy"]
    assert steps["kolla-rotate-keys-rotate"][1]["services"] == ["keystone"]
    assert steps["kolla-rotate-keys-deploy"][1]["pillar"] == {"kolla_services": ["keystone"]}
    assert list(rendered("rotate_keys", {}, {"kolla_keys.rotating": lambda: []})) == ["kolla-rotate-keys-nothing"]


def test_a_compute_drain_is_one_runner_step_on_the_master_and_a_bad_order_is_refused():
    steps = rendered("compute", {"kolla_compute": {"action": "drain", "host": "host2", "timeout": 90}}, {})
    assert steps == {"kolla-compute-drain": ("salt.runner", {"name": "kolla_compute.drain", "host": "host2",
                                                             "timeout": 90.0})}
    steps = rendered("compute", {"kolla_compute": {"action": "undrain", "host": "host2"}}, {})
    assert steps == {"kolla-compute-undrain": ("salt.runner", {"name": "kolla_compute.undrain", "host": "host2"})}
    for order in ({}, {"kolla_compute": {"action": "evacuate", "host": "host2"}}, {"kolla_compute": {"action": "drain"}}):
        steps = rendered("compute", order, {})
        assert list(steps) == ["kolla-compute-refused"] and steps["kolla-compute-refused"][1]["name"] == \
            "kolla_rollout.refuse"
