import json
import os

import pytest
import yaml

from kolla_salt import paths
from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.declaration.settings import load_passwords, load_settings, settings_for_release, wanted_passwords
from kolla_salt.errors import ValidationError
from operator_files import write_secrets


def write(folder, name, data, mode=0o600):
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    os.chmod(path, mode)
    return path


def test_globals_override_defaults_and_derive_tag(tmp_path):
    write(tmp_path, "globals.yml", {"openstack_release": "2026.1", "kolla_install_type": "source"})
    settings = load_settings(tmp_path)
    assert settings["openstack_tag"] == "2026.1-source-trixie"   # the release's default base (releases.yml)
    assert settings["release_versions"] == {"keystone": "29.0.0", "glance": "32.0.0", "placement": "15.0.0", "nova": "33.0.2",
                                           "neutron": "28.0.2", "horizon": "25.7.3", "heat": "26.0.2",
                                           "octavia": "18.0.1"}
    assert settings["api_interface"] == "lo"


def test_every_bad_key_is_reported_with_the_file(tmp_path):
    """Wrong types, and values narrower than their type (ports, durations, log rotation, neutron's networks)."""
    path = write(tmp_path, "globals.yml", {
        "keystone_public_port": 70000, "database_port": 0, "memcached_port": 65536, "enable_keystone": "maybe", "openstack_release": 2026.1,
        "health_check_interval": 0, "cron_logrotate_log_maxsize": "100 MB", "cron_logrotate_rotation_count": 0,
        "cron_logrotate_rotation_interval": "hourly", "health_pressure_limit": 1.5, "health_slow_timeout_factor": 0.5,
        "health_stall_window": "10s", "neutron_physical_networks": "physnet1, physnet2",
        "ovs_integration_bridge": "br-int-of-the-cloud", "nova_compute_shutdown_timeout": 30,
        "memcache_dead_retry": 0, "mariadb_backup_directory": "backups", "nova_console": "spice"})
    with pytest.raises(ValidationError) as error:
        load_settings(tmp_path)
    problems = "\n".join(error.value.problems)
    assert f"{path}: key 'keystone_public_port' must be a port number" in problems
    assert f"{path}: key 'database_port' must be a port number (1-65535), got 0" in problems
    assert f"{path}: key 'memcached_port' must be a port number (1-65535), got 65536" in problems
    assert f"{path}: key 'enable_keystone' must be true/false, got 'maybe'" in problems
    assert f'''{path}: key 'openstack_release' must be a string, got 2026.1; write it quoted: openstack_release: "2026.1"''' in problems
    assert f"{path}: key 'health_check_interval' must be greater than 0, got 0" in problems
    assert f"{path}: key 'cron_logrotate_log_maxsize' must be a size such as 100M" in problems
    assert f"{path}: key 'cron_logrotate_rotation_count' must be at least 1, got 0" in problems
    assert f"{path}: key 'cron_logrotate_rotation_interval' must be daily, weekly, monthly or yearly" in problems
    assert f"{path}: key 'health_pressure_limit' must be a share of time, at most 1, got 1.5" in problems
    assert f"{path}: key 'health_slow_timeout_factor' must be at least 1, got 0.5" in problems
    assert f"{path}: key 'health_stall_window' must be a whole number, got '10s'" in problems
    assert f"{path}: key 'nova_compute_shutdown_timeout' must be between 0 and 20 seconds, got 30" in problems
    assert f"{path}: key 'memcache_dead_retry' must be between 1 and 300 seconds, got 0" in problems
    assert f"{path}: key 'mariadb_backup_directory' must be an absolute path, got 'backups'" in problems
    assert f"{path}: key 'nova_console' must be novnc or none, got 'spice'" in problems
    assert (f"{path}: key 'neutron_physical_networks' must be * or physical network names separated by commas "
            "(letters, digits, '.', '_', '-'; e.g. physnet1,physnet2), got 'physnet1, physnet2'") in problems
    assert (f"{path}: key 'ovs_integration_bridge' must be a bridge name of 1 to 15 letters, digits, '.', '_' or '-', "
            "got 'br-int-of-the-cloud'") in problems
    write(tmp_path, "globals.yml", {"cron_logrotate_log_maxsize": "512k", "cron_logrotate_rotation_interval": "daily",
                                    "neutron_physical_networks": "physnet1,provider-2", "ovs_integration_bridge": "br-kst"})
    settings = load_settings(tmp_path)
    assert (settings["cron_logrotate_log_maxsize"], settings["neutron_physical_networks"]) == ("512k", "physnet1,provider-2")
    write(tmp_path, "globals.yml", {"openstack_release": "folsom"})
    with pytest.raises(ValidationError, match=f"{path}: key 'openstack_release' is 'folsom'"):
        load_settings(tmp_path)


MEMO = {"set": "control", "settings": {"enable_memo": False, "memo_mode": "fast", "memo_depth": 3}}


def memo_folder(tmp_path, monkeypatch, rules):
    """The checkout's services' settings.yml files and one more, memo's, with `rules`."""
    import shutil
    services = tmp_path / "services"
    for path in paths.SERVICES_DIR.glob("*/settings.yml"):
        (services / path.parent.name).mkdir(parents=True)
        shutil.copy(path, services / path.parent.name)
    (services / "memo").mkdir()
    (services / "memo" / "settings.yml").write_text(yaml.safe_dump({**MEMO, "rules": rules}))
    monkeypatch.setattr(paths, "SERVICES_DIR", services)
    return services / "memo" / "settings.yml"


def test_a_rule_of_a_services_folder_is_kept_naming_the_file_and_key(tmp_path, monkeypatch):
    """What a value must be beyond its type is the folder's (settings.yml `rules`): core
    names no service. A `when` rule holds, on the composed value, while its setting is on."""
    memo_folder(tmp_path, monkeypatch, {
        "memo_mode": {"choices": ["fast", "slow"]}, "memo_depth": {"range": [1, 9], "unit": "levels"},
        "kolla_internal_vip_address": {"not_pattern": r"10\..*", "when": "enable_memo", "what": "outside 10/8",
                                       "why": "memo owns 10/8"}})
    path = write(tmp_path, "globals.yml", {"memo_mode": "quick", "memo_depth": 0, "enable_memo": "yes",
                                           "kolla_internal_vip_address": "10.0.0.5"})
    with pytest.raises(ValidationError) as error:
        load_settings(tmp_path)
    assert sorted(error.value.problems) == [
        f"{path}: key 'kolla_internal_vip_address' must be outside 10/8 when enable_memo is true, got '10.0.0.5': "
        f"memo owns 10/8",
        f"{path}: key 'memo_depth' must be between 1 and 9 levels, got 0",
        f"{path}: key 'memo_mode' must be fast or slow, got 'quick'"]
    write(tmp_path, "globals.yml", {"memo_mode": "slow", "memo_depth": 9, "kolla_internal_vip_address": "10.0.0.5"})
    assert load_settings(tmp_path)["memo_depth"] == 9


@pytest.mark.parametrize("rules, problem", [
    ({"memo_mode": {"choice": ["fast"]}}, "key 'rules.memo_mode': expected a mapping of one test (choices, min, "
                                          "max, range, pattern, not_pattern) and unit, what, why, when, got "
                                          "{'choice': ['fast']}"),
    ({"memo_mode": {"min": 1, "max": 2}}, "key 'rules.memo_mode': expected a mapping of one test"),
    ({"memo_speed": {"min": 1}}, "key 'rules.memo_speed': no file declares the setting 'memo_speed'"),
    ({"openstack_release": {"choices": ["2026.1"]}}, "key 'rules.openstack_release': the setting is declared in "
                                                     f"{paths.DEFAULTS_DIR / 'globals.yml'}; a rule on another "
                                                     "file's setting needs `when`"),
    ({"memo_mode": {"choices": ["slow"], "when": "memo_depth"}},
     "key 'rules.memo_mode': when 'memo_depth' is not a declared true/false setting"),
    ({"memo_depth": {"pattern": "[0-9]", "what": "a digit"}}, "key 'rules.memo_depth': pattern: expected a "
                                                             "regular expression of a string setting"),
    ({"memo_mode": {"pattern": "[a-z]+"}}, "key 'rules.memo_mode': pattern: expected a regular expression of a "
                                          "string setting, with `what` saying what it allows"),
    ({"memo_mode": {"pattern": "[a-z", "what": "letters"}}, "key 'rules.memo_mode': pattern: unterminated"),
    ({"memo_depth": {"range": [9, 1]}}, "key 'rules.memo_depth': range [9, 1]: expected [low, high]"),
    ({"memo_mode": {"min": 1}}, "key 'rules.memo_mode': min 1: expected a number of a number setting"),
    ({"memo_depth": {"min": 5}}, "key 'rules.memo_depth': its default 3 is not at least 5"),
    (["memo_depth"], "key 'rules' must be a mapping of settings to their rules"),
])
def test_a_malformed_rule_is_refused_naming_the_settings_file(tmp_path, monkeypatch, rules, problem):
    memo = memo_folder(tmp_path, monkeypatch, rules)
    with pytest.raises(ValidationError) as error:
        load_settings(tmp_path)
    assert any(p.startswith(f"{memo}: {problem}") for p in error.value.problems), error.value.problems


def test_ansible_boolean_forms_are_read_as_ansible_reads_them(tmp_path):
    write(tmp_path, "globals.yml", {"enable_cron": "no", "enable_memcached": "Yes", "enable_health_loop": "on"})
    settings = load_settings(tmp_path)
    assert (settings["enable_cron"], settings["enable_memcached"], settings["enable_health_loop"]) == (False, True, True)


def test_kolla_ansible_keys_we_do_not_use_only_warn(tmp_path):
    write(tmp_path, "globals.yml", {"kolla_base_distro": "debian", "kolla_internal_fqdn": "cloud.example"})
    warnings = []
    load_settings(tmp_path, warnings)
    assert warnings == [f"{tmp_path / 'globals.yml'}: key 'kolla_internal_fqdn' is not used by kolla-salt (ignored)"]


def test_the_base_is_kolla_ansibles_keys_and_a_base_a_release_does_not_build_on_is_refused(tmp_path):
    """kolla_base_distro_version picks the base (bookworm stays buildable for 2026.1, in
    the tag so both bases' images can sit side by side); ubuntu, a base the release
    does not build on, and the old key names are refused naming the key."""
    write(tmp_path, "globals.yml", {"kolla_base_distro_version": "bookworm"})
    assert load_settings(tmp_path)["openstack_tag"] == "2026.1-source-bookworm"
    path = write(tmp_path, "globals.yml", {"kolla_base_distro": "ubuntu", "openstack_release": "zed",
                                           "kolla_install_type": "binary", "kolla_base_distro_version": "trixie",
                                           "base_distro_release": "bookworm"})
    with pytest.raises(ValidationError) as error:
        load_settings(tmp_path)
    assert error.value.problems == [
        f"{path}: key 'kolla_base_distro' is 'ubuntu'; kolla-salt builds its images on debian only",
        f"{path}: key 'base_distro_release' is now 'kolla_base_distro_version' (kolla-ansible's name)",
        f"{path}: key 'kolla_base_distro_version' is 'trixie'; release zed builds on bookworm "
        f"(pillar/defaults/releases.yml: bases)"]


def test_a_release_followed_apart_takes_its_own_default_base_unless_one_is_declared(tmp_path):
    """zed has binary images on bookworm only; an empty base follows each release's default."""
    write(tmp_path, "globals.yml", {})
    assert settings_for_release(load_settings(tmp_path), "zed")["openstack_tag"] == "zed-bookworm"
    write(tmp_path, "globals.yml", {"kolla_base_distro_version": "trixie"})
    with pytest.raises(ValidationError, match="key 'kolla_base_distro_version' is 'trixie'; release zed builds on"):
        settings_for_release(load_settings(tmp_path), "zed")


def test_release_without_binary_images_needs_source(tmp_path):
    write(tmp_path, "globals.yml", {"openstack_release": "2026.1", "kolla_install_type": "binary"})
    with pytest.raises(ValidationError, match="has no binary images; set kolla_install_type to source"):
        load_settings(tmp_path)


def test_passwords_must_be_private_and_complete(tmp_path):
    path = write(tmp_path, "passwords.yml", {"database_password": "x"}, mode=0o646)
    with pytest.raises(ValidationError) as error:
        load_passwords(tmp_path)
    problems = "\n".join(error.value.problems)
    assert "mode is 0646" in problems and "others could write it" in problems
    assert "key 'rabbitmq_password' is missing" in problems
    assert os.stat(path).st_mode & 0o777 == 0o646     # refused: left as it was


def test_a_readable_passwords_file_is_made_private(tmp_path):
    """kolla-genpwd writes 0640: readable by the group, writable by the owner only."""
    wanted = wanted_passwords()
    path = write(tmp_path, "passwords.yml", {**{k: f"pw-{k}" for k in wanted},
                                             "keystone_ssh_key": {"private_key": "k", "public_key": "p"}},
                 mode=0o640)
    notes = []
    passwords = load_passwords(tmp_path, notes)
    assert os.stat(path).st_mode & 0o777 == 0o600 and "mode was 0640, made 0600" in notes[0]
    assert "keystone_ssh_key" not in passwords and passwords["keystone_health_password"]


def test_pillar_renders_config_json_and_keystone_conf(tmp_path):
    write(tmp_path, "globals.yml", {"container_name_prefix": "t-"})
    write_secrets(tmp_path)
    pillar = build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]
    names = [s["name"] for s in pillar["services"]]
    assert names == ["cron", "haproxy", "mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement"]
    keystone = pillar["services"][5]
    container = keystone["containers"][0]
    assert container["spec"]["name"] == "t-keystone"
    assert "pw-keystone_database_password@127.0.0.1:3306/keystone" in container["files"]["keystone.conf"]
    config = yaml.safe_load(container["files"]["config.json"])
    assert config["user"] == "keystone"
    assert config["config_files"][0]["dest"] == "/etc/keystone/keystone.conf"
    assert [j["name"] for j in keystone["jobs"]][:2] == ["t-keystone_database", "t-keystone_db_expand"]
    # memcached only writes to stderr: kolla_start also copies it to its log folder.
    memcached = yaml.safe_load(pillar["services"][4]["containers"][0]["files"]["config.json"])
    assert memcached["log_file"] == "/var/log/kolla/memcached/memcached.log"
    assert "log_file" not in config
    # The rotation rules come from globals.yml's cron_logrotate_* settings.
    rules = pillar["services"][0]["containers"][0]["files"]["logrotate.rules"]
    assert "/var/log/kolla/*/*.log {" in rules and "maxsize 100M" in rules and "rotate 6" in rules


def test_an_interface_the_host_does_not_have_is_refused(tmp_path):
    write_secrets(tmp_path)
    write(tmp_path, "globals.yml", {"network_interface": "nosuch0"})
    with pytest.raises(ValidationError, match="key 'api_interface'/'network_interface' is 'nosuch0', which has no "
                                              r"IPv4 address on this host \(have: eth0, lo\)"):
        build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"], "eth0": ["198.18.0.2"]})
    write(tmp_path, "globals.yml", {})    # the all-in-one default, lo, stays valid
    assert build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["settings"]["api_interface"] == "lo"


def test_tunnels_end_on_the_tunnel_interface_or_on_the_bridge_that_took_its_address(tmp_path):
    """ovn-controller's encap IP: the API address by default; tunnel_interface's own
    address; once the userspace datapath moved that address onto ovs_tunnel_bridge,
    the bridge's (the next deploy renders the same). Refused: the API interface as the
    tunnel link of the userspace datapath (its address would move into OVS), and a
    link without an address, naming the key."""
    write_secrets(tmp_path)
    openvswitch = {"enable_openvswitch": True, "enable_ovn": True, "enable_ovn_controller": True,
                   "network_interface": "eth0", "ovs_datapath_type": "netdev"}

    def encap_ip(interfaces, **settings):
        write(tmp_path, "globals.yml", {**openvswitch, **settings})
        pillar = build_pillar(tmp_path, interfaces=interfaces)["kolla"]
        controller = next(s for s in pillar["services"] if s["name"] == "ovn_controller")
        env = controller["containers"][0]["files"]["ovn-controller.env"]
        vswitchd = next(c for s in pillar["services"] if s["name"] == "openvswitch"
                        for c in s["containers"] if c["spec"]["name"] == "openvswitch_vswitchd")
        return next(line.split("=", 1)[1] for line in env.splitlines() if line.startswith("OVN_ENCAP_IP=")), \
            json.loads(vswitchd["files"]["config.json"])["command"], vswitchd["spec"]["on_destroy"]

    api = {"lo": ["127.0.0.1"], "eth0": ["198.18.0.12"]}
    assert encap_ip({**api, "eth1": ["198.18.1.12"]}) == (
        "198.18.0.12", "kolla_ovs_vswitchd_start netdev br-int", ["kolla_ovs_bridges_remove", "br-int"])
    # The bridge and its link, where ovs-vswitchd moves the address, and where destroy gives it back.
    tunnel = ("198.18.1.12", "kolla_ovs_vswitchd_start netdev br-int --tunnel eth1 br-tunnel",
              ["kolla_ovs_bridges_remove", "br-int", "--tunnel", "eth1", "br-tunnel"])
    assert encap_ip({**api, "eth1": ["198.18.1.12"]}, tunnel_interface="eth1") == tunnel
    assert encap_ip({**api, "eth1": [], "br-tunnel": ["198.18.1.12"]}, tunnel_interface="eth1") == tunnel
    with pytest.raises(ValidationError, match="key 'tunnel_interface' is 'eth0', the API interface: with the "
                                              "userspace datapath"):
        encap_ip(api, tunnel_interface="eth0")
    assert encap_ip(api, tunnel_interface="eth0", ovs_datapath_type="system")[0] == "198.18.0.12"
    with pytest.raises(ValidationError, match="key 'tunnel_interface' is 'eth1', which has no IPv4 address on this "
                                              "host, nor has br-tunnel"):
        encap_ip(api, tunnel_interface="eth1")


def test_a_host_receives_only_the_secrets_its_services_use(tmp_path):
    write_secrets(tmp_path)
    write(tmp_path, "globals.yml", {"roles": {"control": ["ctl*"], "compute": ["cmp*"], "network": ["ctl*"],
                                              "storage": ["ctl*"]}})
    control = build_pillar(tmp_path, "ctl1", interfaces={"lo": ["127.0.0.1"]})["kolla"]
    compute = build_pillar(tmp_path, "cmp1", interfaces={"lo": ["127.0.0.1"]})["kolla"]
    assert {"database_password", "keystone_admin_password", "rabbitmq_password"} <= set(control["passwords"])
    assert [s["name"] for s in compute["services"]] == ["cron"]
    assert compute["passwords"] == {}


def test_log_rotation_follows_every_host_given_a_service_even_by_a_service_role(tmp_path):
    """cron's folder says `role: all`: a host named only by roles.memcached gets it too."""
    write_secrets(tmp_path, value=lambda key: "pw")
    write(tmp_path, "globals.yml", {"roles": {"control": ["ctl1"], "compute": [], "network": [], "storage": [],
                                              "memcached": ["cache1"]}})
    names = {host: [s["name"] for s in build_pillar(tmp_path, host, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]]
             for host in ("ctl1", "cache1", "other")}
    assert names["cache1"] == ["cron", "memcached"]
    assert "cron" in names["ctl1"] and "memcached" not in names["ctl1"]
    assert names["other"] == []


def container_specs(folder, settings):
    """Each container's spec in the pillar build_pillar makes from `settings` (globals.yml), by name."""
    write_secrets(folder)
    write(folder, "globals.yml", settings)
    return {c["spec"]["name"]: c["spec"] for s in build_pillar(folder, interfaces={"lo": ["127.0.0.1"]})
            ["kolla"]["services"] for c in s["containers"]}


COMPUTE = {"enable_nova": True, "enable_nova_compute": True, "enable_libvirt": True}
PREFIXED_COMPUTE = {**COMPUTE, "container_name_prefix": "kx-"}


def test_a_containers_own_tag_beats_its_images(tmp_path):
    """nova_compute_tag moves the compute host's nova-compute alone; nova_tag the rest."""
    specs = container_specs(tmp_path, {**COMPUTE, "nova_tag": "control-fix", "nova_compute_tag": "compute-fix"})
    images = {name: spec["image"] for name, spec in specs.items()}
    assert images["nova_compute"] == "kolla-salt/nova:compute-fix"
    assert images["nova_api"] == images["nova_scheduler"] == "kolla-salt/nova:control-fix"
    assert images["nova_libvirt"] == "kolla-salt/libvirt:2026.1-source-trixie"


def test_a_service_enabled_without_one_it_needs_is_refused_naming_both_keys(tmp_path):
    """neutron without OVN would wait at its start until the deploy timed out."""
    write_secrets(tmp_path)
    write(tmp_path, "globals.yml", {"enable_neutron": True, "enable_nova": True, "enable_placement": False})
    with pytest.raises(ValidationError) as refused:
        build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})
    assert str(refused.value).splitlines() == [
        f"{tmp_path / 'globals.yml'}: key 'enable_nova' is true, but nova needs placement "
        "(salt/states/kolla/nova/service.yaml: needs): set enable_placement: true",
        f"{tmp_path / 'globals.yml'}: key 'enable_neutron' is true, but neutron needs ovn "
        "(salt/states/kolla/neutron/service.yaml: needs): set enable_ovn: true"]
    write(tmp_path, "globals.yml", {"enable_neutron": True, "enable_ovn": True, "enable_nova": True})
    assert {"neutron", "ovn", "nova"} <= {s["name"] for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]}


def test_nova_restarts_its_conductor_before_its_scheduler_and_api(tmp_path):
    """nova's rolling-upgrade order: a service's containers are swapped in the order
    its folder lists them, so the conductor (the only one that writes the database)
    runs the new code before the services that call it."""
    write_secrets(tmp_path)
    write(tmp_path, "globals.yml", {"enable_nova": True})
    (nova,) = [s for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]
               if s["name"] == "nova"]
    assert [c["spec"]["name"] for c in nova["containers"]][:3] == ["nova_conductor", "nova_scheduler", "nova_api"]


def test_a_new_nova_compute_reloads_the_nova_services_that_pin_its_rpc_version(tmp_path):
    """nova_compute's `reloads` name containers of the nova folder: in the pillar they
    carry the deployment's prefix, as the containers they name do."""
    containers = container_specs(tmp_path, PREFIXED_COMPUTE)
    # Not the scheduler: it sends nothing to nova-compute, and SIGHUP ends its workers (docs/design.md, nova).
    assert containers["kx-nova_compute"]["reloads"] == ["kx-nova_conductor", "kx-nova_api"]
    assert set(containers["kx-nova_compute"]["reloads"]) <= set(containers)


def test_a_swap_of_libvirt_waits_for_nova_compute_to_pass_its_check_again(tmp_path):
    """libvirt's `rechecks` names nova_compute (with the deployment's prefix), which
    reconnects to a new libvirt by itself; without nova_compute there is nothing to wait for."""
    assert container_specs(tmp_path, PREFIXED_COMPUTE)["kx-nova_libvirt"]["rechecks"] == ["kx-nova_compute"]
    without_compute = {**PREFIXED_COMPUTE, "enable_nova_compute": False}
    assert "rechecks" not in container_specs(tmp_path, without_compute)["kx-nova_libvirt"]


def test_a_set_waits_for_the_sets_it_is_after_and_a_parallel_sets_services_for_nothing_of_theirs():
    """What each service's first state requires on one host (salt/states/kolla/service.jinja):
    the database, RabbitMQ and memcached wait for nothing, keystone for the database and
    memcached (not RabbitMQ), glance and nova not for each other; a set absent here passes
    its wait on to the sets it is after (nova_compute on a compute host)."""
    from kolla_salt.declaration.tree import waits
    control = waits(["mariadb", "rabbitmq", "memcached", "keystone", "glance", "nova", "neutron"])
    assert control["mariadb"] == control["rabbitmq"] == control["memcached"] == []
    assert control["keystone"] == ["mariadb", "memcached"]
    assert control["glance"] == control["nova"] == ["mariadb", "rabbitmq", "memcached", "keystone"]
    compute = waits(["openvswitch", "ovn_controller", "libvirt", "nova_compute"])
    assert compute == {"openvswitch": [], "ovn_controller": ["openvswitch"],
                       "libvirt": ["openvswitch", "ovn_controller"],
                       "nova_compute": ["openvswitch", "ovn_controller", "libvirt"]}


@pytest.mark.parametrize("control, problem", [
    ({"after": ["compute"]}, "control.after: 'compute' is not a set before it (sets before it: common)"),
    ({"after": "common"}, "control.after: expected a list of set names, got a string"),
    ({"afer": ["common"]}, "control.afer: not a key of a set (keys: name, after, parallel)"),
])
def test_a_tree_whose_set_starts_after_a_later_or_unknown_set_is_refused(tmp_path, monkeypatch, control, problem):
    """A set may start only after sets before it: the tree's order stays one that a
    master's walk and every upgrade keep. A misspelt key is not taken for no key."""
    from kolla_salt.declaration.tree import load_tree
    (tmp_path / "tree.yaml").write_text(yaml.safe_dump([{"name": "common"}, {"name": "control", **control},
                                                        {"name": "compute"}]))
    monkeypatch.setattr(paths, "SERVICES_DIR", tmp_path)
    with pytest.raises(ValidationError) as raised:
        load_tree()
    assert raised.value.problems == [f"{tmp_path / 'tree.yaml'}: {problem}"]


@pytest.mark.parametrize("declarations, order, problem", [
    ({"b": {"set": "control"}, "a": {"set": "control", "after": ["b"]}, "c": {"set": "control"}},
     ["b", "a", "c"], None),
    ({"a": {"set": "contrl"}}, [], "a/settings.yml: key 'set' must name a set of tree.yaml (common, control), "
                                  "got 'contrl'"),
    ({"a": {"set": "control", "after": ["cron"]}, "cron": {"set": "common"}}, ["a"],
     "a/settings.yml: key 'after': 'cron' is not a service of set control (a)"),
    ({"a": {"set": "control", "after": ["b"]}, "b": {"set": "control", "after": ["a"]}}, [],
     "control: the services' `after` make a cycle: a, b"),
])
def test_a_services_folder_names_its_set_and_what_it_comes_after(tmp_path, monkeypatch, declarations, order,
                                                                  problem):
    """Each folder's settings.yml places its service in a set of tree.yaml, after the
    services of that set it names (the others by name): a service is its folder. An
    unknown set, an `after` outside the set or a cycle is refused naming the file."""
    from kolla_salt.declaration.tree import load_tree
    (tmp_path / "tree.yaml").write_text(yaml.safe_dump([{"name": "common"}, {"name": "control"}]))
    for service, declared in declarations.items():
        (tmp_path / service).mkdir()
        (tmp_path / service / "settings.yml").write_text(yaml.safe_dump(declared))
    monkeypatch.setattr(paths, "SERVICES_DIR", tmp_path)
    if problem is None:
        assert dict(load_tree())["control"] == order
        return
    with pytest.raises(ValidationError) as raised:
        load_tree()
    assert [p.replace(f"{tmp_path}/", "") for p in raised.value.problems] == [problem]


def test_what_a_restore_forgets_is_asked_where_the_database_is_even_without_nova(tmp_path):
    """nova's restore_forgets (its servers made since a backup) reach the mariadb entry
    of a database host that runs no nova: a restore there names them before it asks."""
    write_secrets(tmp_path, value=lambda key: "pw")
    write(tmp_path, "globals.yml", {**COMPUTE, "roles": {"control": ["ctl1"], "compute": [], "network": [],
                                                         "storage": [], "mariadb": ["db1"]}})
    services = {s["name"]: s for s in build_pillar(tmp_path, "db1", interfaces={"lo": ["127.0.0.1"]})
                ["kolla"]["services"]}
    assert "nova" not in services
    assert "servers" in services["mariadb"]["restore_forgets"]
    assert "{taken}" in services["mariadb"]["restore_forgets"]["servers"]["query"]


def test_novas_online_data_migrations_wait_for_every_service_and_the_walk_knows_it(tmp_path):
    """nova's upgrade order: its online data migrations once the compute hosts run the
    new code too (a job `after_every_service`, salt/states/kolla/final.sls), on nova's
    host; a master's walk gives them its last step (placement's `final`)."""
    from kolla_salt.declaration.roles import placement
    write_secrets(tmp_path, value=lambda key: "pw")
    write(tmp_path, "globals.yml", COMPUTE)
    nova = next(s for s in build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]
                if s["name"] == "nova")
    # The compute hosts are mapped to a cell before the deploy ends: a server boots at once.
    assert [j["name"] for j in nova["final_jobs"]] == ["nova_discover_hosts", "nova_online_data_migrations"]
    assert "nova_online_data_migrations" not in [j["name"] for j in nova["jobs"] + nova["post_jobs"]]
    assert {step["service"] for step in placement(tmp_path) if step["final"]} == {"nova"}


def test_a_services_settings_come_from_its_folder_and_one_declared_twice_is_refused(tmp_path, monkeypatch):
    """Each service folder's settings.yml declares its globals.yml keys and passwords;
    `kolla-salt settings` says which file declares each, and what globals.yml sets. A
    key that two folders declare is refused naming both files."""
    import subprocess
    import sys
    from kolla_salt.declaration.settings import default_settings
    keystone = paths.SERVICES_DIR / "keystone" / "settings.yml"
    write(tmp_path, "globals.yml", {"keystone_public_port": 15000})
    listed = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "--config-dir", str(tmp_path), "settings"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert "keystone_public_port: 5000 (globals.yml: 15000)\tsalt/states/kolla/keystone/settings.yml" in listed
    assert "openstack_release: \"2026.1\"\tpillar/defaults/globals.yml" in listed
    assert len(listed) == len(default_settings())
    assert {"keystone_admin_password", "database_password"} <= set(wanted_passwords())

    services = tmp_path / "services"
    for name in ("keystone", "memo"):
        (services / name).mkdir(parents=True)
    (services / "keystone" / "settings.yml").write_text(keystone.read_text())
    (services / "memo" / "settings.yml").write_text("settings:\n  keystone_public_port: 6000\n")
    monkeypatch.setattr(paths, "SERVICES_DIR", services)
    with pytest.raises(ValidationError) as refused:
        default_settings()
    assert refused.value.problems == [f"{services / 'memo' / 'settings.yml'}: key 'settings.keystone_public_port' "
                                      f"is declared in {services / 'keystone' / 'settings.yml'} too"]


def test_services_spread_over_hosts_without_haproxy_are_refused_naming_what_they_would_miss(tmp_path):
    """Without haproxy every service calls the APIs (and the database) at its own host's
    address: a compute host without nova and keystone would fail at its start, so the
    master refuses it before anything changes, naming the host, the service and what it
    misses; with haproxy's VIP, and on one host, the same services are fine."""
    from kolla_salt.declaration.roles import apis_out_of_reach, placement
    write(tmp_path, "globals.yml", {**COMPUTE, "roles": {"control": ["ctl*"], "compute": ["cmp1"]},
                                    "enable_haproxy": False})
    minions = ["cmp1", "ctl1"]
    problems = apis_out_of_reach(load_settings(tmp_path), placement(tmp_path), minions, tmp_path / "globals.yml")
    # The control host runs what it calls; cron on the compute host waits for nothing.
    assert problems == [f"{tmp_path / 'globals.yml'}: key 'enable_haproxy' is false, so every service reaches the "
                        "APIs at its own host's address, but host cmp1 runs libvirt, nova_compute without keystone, "
                        "glance, placement, nova: set enable_haproxy and enable_keepalived to true with a "
                        "kolla_internal_vip_address, or place keystone, glance, placement, nova on cmp1 too"], problems
    write(tmp_path, "globals.yml", {**COMPUTE, "roles": {"control": ["ctl*"], "compute": ["cmp1"]},
                                    "enable_haproxy": True, "kolla_internal_vip_address": "198.18.0.10"})
    assert apis_out_of_reach(load_settings(tmp_path), placement(tmp_path), minions, tmp_path / "globals.yml") == []
    write(tmp_path, "globals.yml", {**COMPUTE, "roles": {"control": ["aio"], "compute": ["aio"]}})
    assert apis_out_of_reach(load_settings(tmp_path), placement(tmp_path), ["aio"], tmp_path / "globals.yml") == []


def test_the_provider_networks_uplink_must_be_a_link_of_its_own_without_an_address(tmp_path):
    """neutron_external_interface becomes a port of Open vSwitch's external bridge: the
    API's or the tunnels' link, or a link with an address, is refused naming the key;
    a bare link is taken and ovs-vswitchd is told to make the bridge on it."""
    write_secrets(tmp_path, value=lambda key: "pw")
    network = {"enable_openvswitch": True, "enable_ovn": True, "enable_ovn_controller": True,
               "network_interface": "eth0", "tunnel_interface": "eth1", "ovs_datapath_type": "netdev"}
    interfaces = {"eth0": ["198.18.0.12"], "eth1": ["198.18.1.12"], "eth2": [], "eth3": ["198.18.2.5"]}
    for link, why in (("eth0", "the link of this host's API or tunnel address"),
                      ("eth1", "the link of this host's API or tunnel address"),
                      ("eth3", "which has the address 198.18.2.5 on this host")):
        write(tmp_path, "globals.yml", {**network, "neutron_external_interface": link})
        with pytest.raises(ValidationError) as refused:
            build_pillar(tmp_path, interfaces=interfaces)
        assert f"key 'neutron_external_interface' is '{link}', {why}" in str(refused.value.problems)
    write(tmp_path, "globals.yml", {**network, "neutron_external_interface": "eth2"})
    services = {s["name"]: s for s in build_pillar(tmp_path, interfaces=interfaces)["kolla"]["services"]}
    vswitchd = next(c for c in services["openvswitch"]["containers"] if c["spec"]["name"] == "openvswitch_vswitchd")
    assert '"kolla_ovs_vswitchd_start netdev br-int --tunnel eth1 br-tunnel --external eth2 br-ex"' in \
        vswitchd["files"]["config.json"], vswitchd["files"]
    # destroy (or Open vSwitch disabled here) removes the external bridge too
    assert vswitchd["spec"]["on_destroy"][-3:] == ["--external", "eth2", "br-ex"]


def test_a_misspelt_key_of_a_folders_definition_is_refused_naming_the_file():
    """A key no code reads would be ignored in silence (`containrs:` would deploy nothing)."""
    from kolla_salt.declaration.rendering import unknown_definition_keys
    assert unknown_definition_keys("memcached", {"role": "control", "containrs": {}}) == [
        "salt/states/kolla/memcached/service.yaml: unknown key 'containrs' (docs/service-folder.md lists those a "
        "folder may hold: role, needs, runs_behind, serial, pause_between_hosts, rollout, caches_database, "
        "restore_forgets, loadbalancer, register, lists, containers, jobs)"]
    assert unknown_definition_keys("memcached", {"role": "control", "containers": {}}) == []


def test_the_services_after_whose_deploy_the_client_files_are_written_come_from_their_folders():
    from kolla_salt.declaration.settings import client_file_services
    assert client_file_services() == {"keystone"}


def test_what_validate_says_of_a_service_comes_from_its_folder_with_the_hosts_values():
    """nova_compute's and openvswitch's folders say what `validate` prints of them on a
    host that runs them; a service whose folder says nothing adds no line."""
    from kolla_salt.declaration.settings import validation_lines
    settings = {"nova_compute_virt_type": "qemu", "virtualization": "emulation", "ovs_datapath_type": "netdev"}
    assert validation_lines(["keystone", "openvswitch", "nova_compute"], settings) == [
        "Open vSwitch forwards with the netdev datapath (system: the kernel's openvswitch module; netdev: userspace)",
        "guests run with qemu; this host offers emulation"]


def ceph_service(folder, **settings):
    """The ceph folder's pillar entry with enable_ceph and `settings` (globals.yml)."""
    write_secrets(folder)
    write(folder, "globals.yml", {"enable_ceph": True, "container_name_prefix": "kx-", **settings})
    (ceph,) = [s for s in build_pillar(folder, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]
               if s["name"] == "ceph"]
    return ceph


def test_ceph_runs_on_the_hosts_network_only_where_it_serves_and_keeps_its_data_on_named_volumes(tmp_path):
    """The daemons and the pools job reach the monitor on the API address (a reason each);
    the bootstrap job, which only writes files, has the container's own network. Data
    lives on the deployment's named volumes, which nothing removes implicitly."""
    ceph = ceph_service(tmp_path)
    specs = {c["spec"]["name"]: c["spec"] for c in ceph["containers"]}
    assert list(specs) == ["kx-ceph_mon", "kx-ceph_mgr", "kx-ceph_osd"]
    for spec in specs.values():
        assert spec["host_namespaces"] == ["net"] and "API address" in spec["reasons"]["net"]
        assert "kx-ceph_keys:/var/lib/ceph/keys" in spec["volumes"]
    assert "kx-ceph_mon:/var/lib/ceph/mon/ceph-local" in specs["kx-ceph_mon"]["volumes"]
    assert "kx-ceph_osd:/var/lib/ceph/osd/ceph-0" in specs["kx-ceph_osd"]["volumes"]
    assert specs["kx-ceph_mon"]["stateful"] and specs["kx-ceph_osd"]["stateful"]
    (bootstrap,) = ceph["jobs"]
    assert bootstrap["name"] == "kx-ceph_bootstrap" and not bootstrap.get("host_namespaces")
    (pools,) = ceph["post_jobs"]
    assert pools["host_namespaces"] == ["net"]
    assert pools["command"][:8] == ["kolla_start", "kolla_ceph_pools", "1", "8", "images", "volumes", "vms", "backups"]


def test_cephs_pool_size_of_one_is_allowed_and_not_warned_about_only_while_it_is_one(tmp_path):
    conf = {c["spec"]["name"]: c["files"] for c in ceph_service(tmp_path)["containers"]}["kx-ceph_osd"]["ceph.conf"]
    assert "mon_allow_pool_size_one = true" in conf and "mon_warn_on_pool_no_redundancy = false" in conf
    assert "bluestore_block_path = /var/lib/ceph/osd/$cluster-$id/block.file" in conf
    assert f"bluestore_block_size = {20 << 30}" in conf
    conf = {c["spec"]["name"]: c["files"] for c in ceph_service(tmp_path, ceph_pool_size=3)["containers"]}[
        "kx-ceph_osd"]["ceph.conf"]
    assert "mon_allow_pool_size_one" not in conf and "osd_pool_default_min_size = 2" in conf


def test_a_services_settings_file_changed_on_disk_is_read_again(tmp_path, monkeypatch):
    """The folders' declarations are read once and kept while their files stay the
    same; a folder's settings.yml that changes is read again (a long-lived minion or
    master sees a checkout's change)."""
    from kolla_salt.declaration.settings import declared_settings
    memo = memo_folder(tmp_path, monkeypatch, {})
    assert declared_settings()[0]["memo_depth"] == 3
    memo.write_text(yaml.safe_dump({**MEMO, "settings": {**MEMO["settings"], "memo_depth": 12}}))
    assert declared_settings()[0]["memo_depth"] == 12
