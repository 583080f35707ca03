import pytest

from kolla_salt.containers.spec import ADDED_LATER, ContainerSpec, diff, normalise_capability
from kolla_salt.errors import ValidationError

BASE = {"name": "keystone", "image": "ns/keystone:1", "environment": {"A": "1"}}


def spec(**changes):
    return ContainerSpec.from_dict({**BASE, **changes}, where="test")


def test_same_data_same_hash_and_order_does_not_matter():
    a = spec(cap_add=["net_admin", "CAP_SYS_TIME"], reasons={"NET_ADMIN": "x", "SYS_TIME": "y"})
    b = spec(cap_add=["SYS_TIME", "NET_ADMIN"], reasons={"SYS_TIME": "y", "NET_ADMIN": "x"})
    assert a.spec_hash() == b.spec_hash()
    assert a.spec_hash() != spec().spec_hash()
    assert normalise_capability("cap_net_raw") == "NET_RAW"


def test_environment_change_is_reported_by_key_without_values():
    changes = diff(spec().canonical(), spec(environment={"A": "secret-2", "B": "x"}).canonical())
    assert changes == {"environment": "changed: A (new value), B (added)"}
    assert "secret-2" not in str(spec(environment={"A": "secret-2"}).canonical())


def test_image_name_and_config_folder_are_not_identity():
    """One image tagged for two releases, or a config read from a snapshot, is the
    same container: images compare by id, config files by hash (ContainerManager)."""
    moved = spec(image="ns/keystone:2", config_dir="/var/lib/kolla-salt/containers/keystone/3/config")
    assert moved.spec_hash() == spec().spec_hash()
    assert diff(spec().canonical(), moved.canonical()) == {}
    assert spec(user="keystone").spec_hash() != spec().spec_hash()


def test_every_problem_is_reported_with_its_key():
    with pytest.raises(ValidationError) as error:
        ContainerSpec.from_dict({"name": "x", "image": "i", "stop_timeout": "soon", "restart_policy": "sometimes",
                                 "host_namespaces": ["net", "time"], "volumes": ["data"], "colour": "red"},
                                where="pillar:x")
    text = str(error.value)
    for expected in ["pillar:x.stop_timeout: expected int, got str 'soon'",
                     "pillar:x.restart_policy: 'sometimes' is not one of",
                     "pillar:x.host_namespaces: 'time' is not one of",
                     "pillar:x.volumes: 'data' is not SOURCE:/DEST[:ro|rw]",
                     "pillar:x.colour: unknown key",
                     "pillar:x.reasons.net: missing"]:
        assert expected in text


def test_privileges_need_a_reason():
    with pytest.raises(ValidationError, match="reasons.privileged: missing"):
        spec(privileged=True)
    assert spec(privileged=True, reasons={"privileged": "libvirt manages VMs"}).privileged


def test_health_check_durations_go_to_docker_in_nanoseconds():
    check = spec(healthcheck={"test": ["kolla_check", "tcp", "127.0.0.1:1"], "interval": 2}).healthcheck
    assert check.to_docker()["interval"] == 2_000_000_000
    assert check.to_docker()["test"] == ["CMD", "kolla_check", "tcp", "127.0.0.1:1"]


def test_swap_mode_defaults_to_stop_first_and_is_validated():
    assert spec().swap == "stop-first" and spec(swap="overlap").swap == "overlap"
    with pytest.raises(ValidationError) as error:
        spec(swap="green")
    assert "test.swap: 'green' is not one of stop-first, overlap, blue-green" in str(error.value)


def test_keys_added_later_keep_the_hash_of_a_container_that_does_not_use_them():
    """`stateful`, `cluster`, `listen` and `on_destroy` came after containers were
    deployed: at their default they leave the canonical form (and spec hash) as it was."""
    assert not set(ADDED_LATER) & set(spec().canonical())
    assert spec(on_destroy=["true"]).canonical()["on_destroy"] == ["true"]
    db = spec(stateful=True, cluster="kst-mariadb")
    assert db.stateful and db.cluster == "kst-mariadb" and db.spec_hash() != spec().spec_hash()
    with pytest.raises(ValidationError) as error:
        spec(stateful="yes", cluster=["a"])
    assert "test.stateful: expected bool" in str(error.value) and "test.cluster: expected str" in str(error.value)


def test_a_container_is_found_by_its_name_as_given_or_with_the_prefix():
    from kolla_salt.containers.spec import named
    found = {"kst-keystone": "running", "cron": "running"}.get
    assert named("keystone", "kst-", found) == ("kst-keystone", "running")
    assert named("cron", "kst-", found) == ("cron", "running")          # as given first
    assert named("kst-keystone", "kst-", found) == ("kst-keystone", "running")
    assert named("nosuch", "kst-", found) == ("nosuch", None)
    assert named("keystone", "", found) == ("keystone", None)           # no prefix: one lookup
