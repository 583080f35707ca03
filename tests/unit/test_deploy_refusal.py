"""What kolla.deploy's first states say becomes the deploy's verdict before anything
changes (kolla_salt.roads.statereturns.refused): on one host or on each host of a prediction."""
import pytest

from kolla_salt.errors import KollaError, ValidationError
from kolla_salt.roads.statereturns import CHECKS_STATE, IN_USE_STATE, refused


def states(checks=None, in_use=None, changed=False):
    run = {"kolla_container_|-kolla-memcached-container-m_|-m_|-running":
           {"result": True, "comment": "", "changes": {"x": 1} if changed else {}, "__run_num__": 2}}
    if checks is not None:
        run[f"kolla_container_|-{CHECKS_STATE}_|-{CHECKS_STATE}_|-deployable"] = {
            "result": not checks[0], "comment": "\n".join(checks[0] or checks[1]), "changes": {}, "__run_num__": 0}
    if in_use is not None:
        run[f"kolla_container_|-{IN_USE_STATE}_|-{IN_USE_STATE}_|-nothing_kept_in_use"] = {
            "result": not in_use, "comment": in_use, "changes": {}, "__run_num__": 1}
    return run


def test_problems_on_any_host_are_bad_input_naming_the_host(capsys):
    with pytest.raises(ValidationError) as refusal:
        refused({"host1": states(([], ["--allow-release-jump: keystone: runs zed"])),
                 "host2": states((["memcached: image x is not on this host", "a second"], []))})
    assert refusal.value.problems == ["host2: memcached: image x is not on this host", "host2: a second"]
    assert "[deploy] host1: --allow-release-jump: keystone: runs zed" in capsys.readouterr().out


def test_one_host_names_no_host_and_its_warnings_go_to_stderr(capsys):
    refused({None: states(([], ["warning: cert.pem: expires 2027-01-01", "--allow-release-jump: k"]))})
    said = capsys.readouterr()
    assert said.err == "warning: cert.pem: expires 2027-01-01\n" and said.out == "[deploy] --allow-release-jump: k\n"


def test_containers_still_in_use_refuse_the_deploy_with_nothing_changed():
    with pytest.raises(KollaError) as refusal:
        refused({"host2": states(([], []), "nova_libvirt is kept though this host no longer declares it")})
    assert str(refusal.value) == "host2: nova_libvirt is kept though this host no longer declares it; nothing was changed"
    assert not isinstance(refusal.value, ValidationError)


def test_a_run_that_passed_its_checks_or_a_salt_error_is_not_refused(capsys):
    refused({None: states(([], []), "", changed=True), "host3": ["Rendering SLS 'base:kolla.deploy' failed"]})
    assert capsys.readouterr().out == ""
