"""The upgrade-path rule: N -> N+1, SLURP .1 -> next .1; jumps and downgrades named."""
import pytest

from kolla_salt.releases import load_releases, upgrade_path_problem

RELEASES = {"zed": {"series": "2022.2"}, "2023.1": {"series": "2023.1 (antelope)"},
            "2024.1": {"series": "2024.1 (caracal)"}, "2025.1": {"series": "2025.1 (epoxy)"},
            "2025.2": {"series": "2025.2 (flamingo)"}, "2026.1": {"series": "2026.1 (gazpacho)"},
            "2026.2": {"series": "2026.2"}}


@pytest.mark.parametrize("old, new", [
    ("2025.1", "2025.2"), ("2025.2", "2026.1"), ("zed", "2023.1"),   # N -> N+1 across a year
    ("2025.1", "2026.1"), ("2024.1", "2025.1"),                        # SLURP
    ("2026.1", "2026.1"),                                              # no change
])
def test_supported_upgrades_pass(old, new):
    assert upgrade_path_problem(RELEASES, old, new) is None


@pytest.mark.parametrize("old, new, why", [
    ("zed", "2026.1", "skips releases"),        # the default of old to today's: four releases at once
    ("2025.2", "2026.2", "skips releases"),     # .2 -> next .2 is not a SLURP
    ("2025.1", "2026.2", "skips releases"),
    ("2026.1", "2025.2", "is a downgrade"),
    ("2026.1", "zed", "is a downgrade"),
])
def test_jumps_and_downgrades_are_named(old, new, why):
    problem = upgrade_path_problem(RELEASES, old, new)
    assert problem.startswith(f"{old} -> {new} {why}")


def test_every_known_release_has_a_series():
    releases = load_releases()
    names = list(releases)
    for old, new in zip(names, names[1:]):   # oldest first: the table is ordered
        assert upgrade_path_problem(releases, new, old).endswith("rollback` the containers)")


def service(name, release, *containers, pinned=()):
    return {"name": name, "release": release,
            "containers": [{"spec": {"name": c}, "pin": 1 if c in pinned else None} for c in containers]}


def test_a_jump_on_any_host_is_refused_naming_that_host():
    """Through a master each host's running releases come from its facts."""
    from kolla_salt.cli import _check_release_paths
    from kolla_salt.errors import ValidationError
    hosts = {"host1": ([service("keystone", "2026.1", "keystone")], {"keystone": "2026.1"}),
             "host2": ([service("keystone", "2026.1", "keystone")], {"keystone": "2026.2"}),
             "host3": ([service("keystone", "2026.1", "keystone", pinned=("keystone",))], {"keystone": "2026.2"})}
    with pytest.raises(ValidationError) as error:
        _check_release_paths(hosts, allow_jump=False)
    assert error.value.problems[0] == ("host2: keystone: runs 2026.2, declared 2026.1: 2026.2 -> 2026.1 is a "
                                       "downgrade: database schemas only migrate forward (to go back, "
                                       "`kolla-salt rollback` the containers)")
    assert len(error.value.problems) == 2   # host3's container is held at a generation: not a change
    _check_release_paths(hosts, allow_jump=True)   # reported, not refused
