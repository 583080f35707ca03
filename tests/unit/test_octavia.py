"""octavia's folder (salt/states/kolla/octavia): OVN's provider only, refused without
neutron's OVN, its config pointing at the OVN databases neutron's does, the driver
agent's sockets shared with the API."""
import configparser

import pytest
import yaml

from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.errors import ValidationError
from operator_files import write_secrets

NEUTRON = {"enable_openvswitch": True, "enable_ovn": True, "enable_ovn_controller": True, "enable_neutron": True}


def operator_folder(folder, **globals_):
    write_secrets(folder)
    (folder / "globals.yml").write_text(yaml.safe_dump({"container_name_prefix": "t-", **globals_}))


def services(folder):
    return {s["name"]: s for s in build_pillar(folder, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]}


def ini(text):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read_string(text)
    return parser


def test_octavia_without_neutrons_ovn_is_refused_naming_the_file_and_key(tmp_path):
    operator_folder(tmp_path, enable_octavia=True)
    with pytest.raises(ValidationError) as error:
        services(tmp_path)
    problems = "\n".join(error.value.problems)
    for key in ("enable_neutron", "enable_ovn"):
        assert f"{tmp_path / 'globals.yml'}: key '{key}' must be True when enable_octavia is true, got False" in problems
    operator_folder(tmp_path, enable_octavia=False)   # off, the rules hold nothing
    assert "octavia" not in services(tmp_path)


def test_only_ovns_provider_is_offered(tmp_path):
    operator_folder(tmp_path, **NEUTRON, enable_octavia=True, octavia_provider_drivers="amphora:Amphora",
                    octavia_provider_agents="amphora")
    with pytest.raises(ValidationError) as error:
        services(tmp_path)
    problems = "\n".join(error.value.problems)
    assert "key 'octavia_provider_drivers' must be ovn:DESCRIPTION" in problems
    assert "key 'octavia_provider_agents' must be ovn, got 'amphora'" in problems


def test_octavia_drives_the_ovn_databases_neutron_uses_and_shares_the_agents_sockets(tmp_path):
    operator_folder(tmp_path, **NEUTRON, enable_octavia=True)
    found = services(tmp_path)
    neutron = ini(found["neutron"]["containers"][0]["files"]["neutron.conf"])
    containers = {c["spec"]["name"]: c for c in found["octavia"]["containers"]}
    assert list(containers) == ["t-octavia_driver_agent", "t-octavia_api"]   # the agent first: the API reports to it
    for container in containers.values():
        config = ini(container["files"]["octavia.conf"])
        assert config["ovn"]["ovn_nb_connection"] == neutron["ovn"]["ovn_nb_connection"] == "tcp:127.0.0.1:6641"
        assert config["ovn"]["ovn_sb_connection"] == neutron["ovn"]["ovn_sb_connection"]
        assert (config["api_settings"]["enabled_provider_drivers"], config["api_settings"]["default_provider_driver"],
                config["driver_agent"]["enabled_provider_agents"]) == ("ovn:OVN provider", "ovn", "ovn")
        sockets = {config["driver_agent"][f"{kind}_socket_path"] for kind in ("status", "stats", "get")}
        assert {path.rsplit("/", 1)[0] for path in sockets} == {"/run/octavia"}
        assert "t-octavia_driver_agent:/run/octavia" in container["spec"]["volumes"]
    assert containers["t-octavia_api"]["spec"]["swap"] == "blue-green"   # behind haproxy's two ports
    jobs = [job["name"] for job in found["octavia"]["jobs"]]
    assert jobs == ["t-octavia_database", "t-octavia_db_sync", "t-octavia_keystone_register"]
