"""Keystone registration: the job the renderer derives from a service folder's `register:` block."""
import json

import pytest
import yaml

from kolla_salt.containers.spec import ContainerSpec
from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.declaration.registration import registration_job
from kolla_salt.errors import ValidationError
from operator_files import write_secrets

SETTINGS = {"api_interface_address": "127.0.0.1", "kolla_internal_fqdn": "127.0.0.10",
            "internal_protocol": "http", "keystone_public_port": 5000, "keystone_admin_user": "admin",
            "keystone_admin_project": "admin", "openstack_region_name": "RegionOne", "container_name_prefix": "t-",
            "enable_keystone": True}
PASSWORDS = {"keystone_admin_password": "admin-secret", "glance_keystone_password": "glance-secret"}
BLOCK = {"service": {"name": "glance", "type": "image", "description": "Images"},
         "endpoints": {"public": "http://127.0.0.1:9292", "internal": "http://127.0.0.1:9292"},
         "user": {"name": "glance", "password": "glance_keystone_password"}}
WHERE = "salt/states/kolla/glance/service.yaml: register"


def derive(block=BLOCK, settings=SETTINGS, passwords=PASSWORDS):
    """(the derived job, problems); the job is None when there are problems."""
    jobs, problems = registration_job("glance", block, settings, passwords, {}, WHERE)
    assert list(jobs) == ([] if problems else ["glance_keystone_register"])
    return jobs.get("glance_keystone_register"), problems


def test_the_job_carries_what_the_block_declares_and_credentials_only_in_its_environment():
    job, problems = derive()
    assert problems == []
    assert job["image"] == "toolbox"
    assert job["command"] == ["kolla_keystone_register"]
    assert job["fills"] == ["t-mariadb"]     # keystone's data: a new database registers again
    env = job["environment"]
    assert env["OS_AUTH_URL"] == "http://127.0.0.10:5000/v3"   # the VIP (kolla_internal_fqdn)
    assert (env["OS_USERNAME"], env["OS_PASSWORD"], env["OS_PROJECT_NAME"]) == ("admin", "admin-secret", "admin")
    assert env["KOLLA_SERVICE_PASSWORD"] == "glance-secret"
    registration = json.loads(env["KOLLA_REGISTRATION"])
    assert registration == {"services": [{"name": "glance", "type": "image", "description": "Images",
                                          "endpoints": {"internal": "http://127.0.0.1:9292",
                                                        "public": "http://127.0.0.1:9292"}}],
                            "user": {"name": "glance", "project": "service", "roles": ["admin", "service"]}}
    assert "secret" not in " ".join(job["command"]) + env["KOLLA_REGISTRATION"]
    spec = ContainerSpec.from_dict({**job, "name": "t-glance_keystone_register", "restart_policy": "no"}, "job")
    assert "admin-secret" not in json.dumps(spec.canonical())   # labels hash environment values


def test_a_changed_declaration_or_password_changes_the_job_so_it_runs_again():
    def spec_hash(**changes):
        block = {**BLOCK, **changes.pop("block", {})}
        job, _ = derive(block, passwords={**PASSWORDS, **changes})
        return ContainerSpec.from_dict({**job, "name": "j", "restart_policy": "no"}, "job").spec_hash()
    base = spec_hash()
    assert spec_hash() == base
    assert spec_hash(glance_keystone_password="new") != base
    assert spec_hash(keystone_admin_password="new") != base
    assert spec_hash(block={"endpoints": {"public": "http://127.0.0.2:9292"}}) != base
    assert spec_hash(block={"user": {**BLOCK["user"], "roles": ["admin"]}}) != base


def test_every_problem_of_a_block_is_named_with_its_file_and_key():
    job, problems = derive({"service": {"name": "glance"}, "endpoints": {"public": "ftp://x", "private": "http://x"},
                            "user": {"name": "glance", "password": "nosuch_password", "roles": "admin"},
                            "extra": 1})
    assert job is None
    for expected in (f"{WHERE}.extra: unknown key",
                     f"{WHERE}.service.type: required, a non-empty string",
                     f"{WHERE}.endpoints.private: unknown key (known: public, internal, admin)",
                     f"{WHERE}.endpoints.public: expected an http(s) URL, got 'ftp://x'",
                     f"{WHERE}.user.roles: expected a list of role names, got 'admin'",
                     f"{WHERE}.user.password: 'nosuch_password' is not a key of passwords.yml"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)
    _, problems = derive(settings={**SETTINGS, "enable_keystone": False})
    assert problems == [f"{WHERE}: glance registers with keystone, but globals.yml key 'enable_keystone' is false"]
    assert derive("glance")[1] == [f"{WHERE}: expected a mapping with service, endpoints and user "
                                   "(or services and user)"]


def test_several_services_of_one_folder_register_with_one_user_each_problem_named():
    """heat's two APIs: two keystone services, each with its endpoints, one user."""
    cfn = {"name": "heat-cfn", "type": "cloudformation", "endpoints": {"public": "http://127.0.0.1:8000/v1"}}
    block = {"services": [{"name": "heat", "type": "orchestration", "description": "Orchestration",
                           "endpoints": {"public": "http://127.0.0.1:8004/v1/%(tenant_id)s"}}, cfn],
             "user": BLOCK["user"]}
    job, problems = derive(block)
    assert problems == []
    registration = json.loads(job["environment"]["KOLLA_REGISTRATION"])
    assert registration["services"] == [
        {"name": "heat", "type": "orchestration", "description": "Orchestration",
         "endpoints": {"public": "http://127.0.0.1:8004/v1/%(tenant_id)s"}},
        {**cfn, "description": ""}]
    assert registration["user"]["name"] == "glance"
    job, problems = derive({"services": [{**cfn, "endpoints": {"private": "http://x"}}, {"type": "x"}, "heat"],
                            "service": BLOCK["service"], "user": BLOCK["user"]})
    assert job is None
    for expected in (f"{WHERE}.service: unknown key (known: services, user)",
                     f"{WHERE}.services[0].endpoints.private: unknown key",
                     f"{WHERE}.services[1].name: required, a non-empty string",
                     f"{WHERE}.services[2]: required, a mapping"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)
    assert derive({"services": [], "user": BLOCK["user"]})[1] == [
        f"{WHERE}.services: expected a non-empty list of {{name, type, description, endpoints}}"]


def write_operator_files(folder, **globals_):
    write_secrets(folder)
    (folder / "globals.yml").write_text(yaml.safe_dump(globals_))


def test_glance_and_placement_folders_derive_their_registration_jobs(tmp_path):
    write_operator_files(tmp_path, container_name_prefix="t-", enable_glance=True, enable_placement=True)
    services = {s["name"]: s for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]}
    assert services["glance"]["set"] == services["placement"]["set"].replace("placement", "glance") \
        == "openstack-control/glance"
    for name, kind, port in (("glance", "image", 9292), ("placement", "placement", 8778)):
        jobs = {j["name"]: j for j in services[name]["jobs"]}
        job = jobs[f"t-{name}_keystone_register"]
        assert job["image"].startswith("kolla-salt/toolbox:")
        registration = json.loads(job["environment"]["KOLLA_REGISTRATION"])
        [declared] = registration["services"]
        assert declared["type"] == kind
        assert set(declared["endpoints"].values()) == {f"http://127.0.0.10:{port}"}   # the VIP
        assert job["environment"]["KOLLA_SERVICE_PASSWORD"] == f"pw-{name}_keystone_password"
        # Registration runs before the API starts (jobs, not post_jobs): its check authenticates as that user.
    # keystone itself declares no registration (keystone-manage bootstrap registers it).
    assert not any(j["name"].endswith("_keystone_register") for j in services["keystone"]["jobs"])


def test_a_bad_glance_port_is_refused_naming_the_key(tmp_path):
    write_operator_files(tmp_path, enable_glance=True, glance_api_port="nine")
    with pytest.raises(ValidationError, match="key 'glance_api_port' must be a whole number, got 'nine'"):
        build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})


def test_a_binary_release_refuses_glance_and_placement_naming_the_key(tmp_path):
    """zed is binary only (Debian's packages): glance and placement have source images only."""
    write_operator_files(tmp_path, openstack_release="zed", kolla_install_type="binary", enable_rabbitmq=False)
    with pytest.raises(ValidationError) as error:
        build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})
    assert sorted(error.value.problems) == [
        f"images/{name}/image.yml: the {name} image is built only as source (install_types), not binary: "
        f"set enable_{name}: false in globals.yml" for name in ("glance", "placement")]
    write_operator_files(tmp_path, openstack_release="zed", kolla_install_type="binary",
                         enable_glance=False, enable_placement=False)
    assert [s["name"] for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]][-1] \
        == "keystone"

