"""The operator's settings and secrets, with their defaults:

    pillar/defaults/globals.yml + <service>/settings.yml + /etc/kolla-salt/globals.yml -> settings
    <service>/settings.yml (passwords)                  + /etc/kolla-salt/passwords.yml   -> passwords

Every problem is named with its file and key (ValidationError) before anything changes.
"""
import hashlib
import hmac
import ipaddress
import os
import re
import stat
from pathlib import Path

import yaml

from . import certificates, paths, safeyaml
from .build import image_ref
from .errors import ValidationError
from .releases import load_releases


def read_yaml(path, problems, kind=dict):
    try:
        data = safeyaml.load_file(path)
    except FileNotFoundError:
        return kind()
    except yaml.YAMLError as error:
        problems.append(f"{path}: not valid YAML: {error}")
        return kind()
    if data is None:
        return kind()
    if not isinstance(data, kind):
        problems.append(f"{path}: expected a {kind.__name__} at the top, got {type(data).__name__}")
        return kind()
    return data


def type_name(value):
    return {bool: "true/false", int: "a whole number", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(value), type(value).__name__)


# What Ansible's `bool` filter reads as true/false: kolla-ansible's globals.yml writes
# enable_<service>: "yes" (quoted, a string), and such a file carries over.
ANSIBLE_BOOLEANS = {**dict.fromkeys(("yes", "y", "true", "t", "on", "1"), True),
                    **dict.fromkeys(("no", "n", "false", "f", "off", "0"), False)}


def ansible_boolean(value):
    """The bool a true/false setting's value means in Ansible's forms, else the value
    unchanged (check_value refuses it then)."""
    return ANSIBLE_BOOLEANS.get(value.strip().lower(), value) if isinstance(value, str) else value


def check_value(key, default, value, where, problems):
    """A value must have the type of its default (bool is not a number)."""
    expected = (int, float) if isinstance(default, float) else type(default)   # 1 is a fine share
    if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, expected):
        # YAML reads an unquoted 2026.1 as a number: say how to write the string.
        hint = f'; write it quoted: {key}: "{value}"' if isinstance(default, str) and isinstance(
            value, (int, float)) and not isinstance(value, bool) else ""
        problems.append(f"{where}: key '{key}' must be {type_name(default)}, got {value!r}{hint}")
        return False
    for applies, valid, what in VALUE_RULES:
        if applies(key) and not valid(value):
            problems.append(f"{where}: key '{key}' must be {what}, got {value!r}")
            return False
    return True


# Settings whose values are narrower than their type: (which keys, test, what a value must be).
VALUE_RULES = [
    (lambda key: key.endswith("_port"), lambda v: 0 < v < 65536, "a port number (1-65535)"),
    (lambda key: key.startswith("health_") or key in ("cron_logrotate_run_interval", "openstack_service_workers"),
     lambda v: v > 0,
     "greater than 0"),
    (lambda key: key == "health_pressure_limit", lambda v: v <= 1, "a share of time, at most 1"),
    (lambda key: key == "health_slow_timeout_factor", lambda v: v >= 1, "at least 1"),
    (lambda key: key == "cron_logrotate_rotation_interval", lambda v: v in ("daily", "weekly", "monthly", "yearly"),
     "daily, weekly, monthly or yearly"),
    (lambda key: key in ("cron_logrotate_rotation_count", "mariadb_backups_kept"), lambda v: v >= 1, "at least 1"),
    (lambda key: key == "mariadb_backup_interval_minutes", lambda v: v >= 0, "0 (no schedule) or more minutes"),
    (lambda key: key == "nova_compute_virt_type", lambda v: v in ("", "kvm", "qemu"),
     "kvm, qemu or empty (what the host offers)"),
    (lambda key: key == "nova_console", lambda v: v in ("novnc", "none"), "novnc or none"),
    # nova-compute's graceful shutdown (27 s: its stop_timeout less 3) holds this wait and its cleanup.
    (lambda key: key == "nova_compute_shutdown_timeout", lambda v: 0 <= v <= 20, "between 0 and 20 seconds"),
    (lambda key: key == "haproxy_queue_timeout", lambda v: 1 <= v <= 300, "between 1 and 300 seconds"),
    (lambda key: key == "memcache_dead_retry", lambda v: 1 <= v <= 300, "between 1 and 300 seconds"),
    (lambda key: key == "ovs_datapath_type", lambda v: v in ("", "system", "netdev"),
     "system (the kernel's), netdev (userspace) or empty (what the host offers)"),
    (lambda key: key == "cron_logrotate_log_maxsize", lambda v: re.fullmatch(r"[1-9][0-9]*[kMG]?", v) is not None,
     "a size such as 100M (a number, then k, M or G)"),
    # neutron's flat_networks: names a bridge mapping can hold (no ':' or spaces), or * for any.
    (lambda key: key == "neutron_physical_networks",
     lambda v: re.fullmatch(r"\*|[A-Za-z0-9_.-]{1,64}(,[A-Za-z0-9_.-]{1,64})*", v) is not None,
     "* or physical network names separated by commas (letters, digits, '.', '_', '-'; e.g. physnet1,physnet2)"),
    # An interface name (the kernel's limit is 15 bytes); it is also an argument of ovs-vswitchd's start.
    (lambda key: key == "ovs_integration_bridge", lambda v: re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", v) is not None,
     "a bridge name of 1 to 15 letters, digits, '.', '_' or '-'"),
]


DECLARATION_KEYS = ("set", "after", "settings", "passwords")


def service_declarations(problems):
    """[(path, its content)] of every service folder's settings.yml: its place in the
    container-set tree (`set`, and `after`: the services of its set it comes after),
    the globals.yml keys the service reads with their defaults (`settings`), the
    passwords.yml keys it needs (`passwords`)."""
    found = []
    for path in sorted(paths.SERVICES_DIR.glob("*/settings.yml")):
        declared = read_yaml(path, problems)
        unknown = sorted(set(declared) - set(DECLARATION_KEYS))
        if unknown:
            problems.append(f"{path}: unknown keys {', '.join(unknown)} ({', '.join(DECLARATION_KEYS)})")
        if not isinstance(declared.get("settings", {}), dict):
            problems.append(f"{path}: key 'settings' must be a mapping of globals.yml keys to their defaults")
        elif not isinstance(declared.get("passwords", []), list) \
                or not all(isinstance(k, str) for k in declared.get("passwords", [])):
            problems.append(f"{path}: key 'passwords' must be a list of passwords.yml keys")
        else:
            found.append((path, declared))
    return found


def _composed(problems, general, part):
    """({key: value}, {key: the file that declares it}) of the general file `general`
    and every service's `part`: a key declared in two files is a problem naming both."""
    composed = read_yaml(general, problems) if general else {}
    origin = dict.fromkeys(composed, general)
    for path, declared in service_declarations(problems):
        entries = declared.get(part) or {}
        for key in entries:
            if key in origin:
                problems.append(f"{path}: key '{part}.{key}' is declared in {origin[key]} too")
            origin[key] = path
            composed[key] = entries[key] if isinstance(entries, dict) else None
    return composed, origin


def _checked(compose, problems):
    """compose(problems), raising what it found when the caller keeps no list."""
    found = [] if problems is None else problems
    composed = compose(found)
    if problems is None and found:
        raise ValidationError(found)
    return composed


def declared_settings(problems=None):
    """({setting: its default}, {setting: the file that declares it}):
    pillar/defaults/globals.yml (the settings of no one service) and each service
    folder's settings.yml."""
    return _checked(lambda found: _composed(found, paths.DEFAULTS_DIR / "globals.yml", "settings"), problems)


def default_settings(problems=None):
    """Every setting with its default."""
    return declared_settings(problems)[0]


def default_ports():
    """{setting: port} of every port setting (its key ends in `_port`) with its default:
    what tests and benchmarks move elsewhere, each by a rule of its own."""
    return {key: value for key, value in default_settings().items() if key.endswith("_port")}


def wanted_passwords(problems=None):
    """Every passwords.yml key a service folder's settings.yml declares."""
    return list(_checked(lambda found: _composed(found, None, "passwords"), problems)[0])


ROLES = ("control", "compute", "network", "storage")


def load_settings(config_dir, warnings=None):
    """Defaults overlaid with globals.yml, validated; plus derived values."""
    problems = []
    defaults = default_settings(problems)
    globals_file = Path(config_dir) / "globals.yml"
    user = read_yaml(globals_file, problems)
    settings = dict(defaults)
    for key, value in user.items():
        if key not in defaults:
            if warnings is not None and key not in RENAMED_SETTINGS:
                warnings.append(f"{globals_file}: key '{key}' is not used by kolla-salt (ignored)")
            continue
        value = ansible_boolean(value) if isinstance(defaults[key], bool) else value
        if check_value(key, defaults[key], value, f"{globals_file}", problems):
            settings[key] = value
    releases = load_releases()
    if settings["openstack_release"] not in releases:
        problems.append(f"{globals_file}: key 'openstack_release' is '{settings['openstack_release']}'; "
                        f"known releases: {', '.join(releases)}")
    if settings["kolla_base_distro"] != "debian":
        problems.append(f"{globals_file}: key 'kolla_base_distro' is {settings['kolla_base_distro']!r}; "
                        f"kolla-salt builds its images on debian only")
    for key, renamed in RENAMED_SETTINGS.items():
        if key in user:
            problems.append(f"{globals_file}: key '{key}' is now '{renamed}' (kolla-ansible's name)")
    if settings["kolla_install_type"] not in ("binary", "source"):
        problems.append(f"{globals_file}: key 'kolla_install_type' must be binary or source, "
                        f"got {settings['kolla_install_type']!r}")
    services = {path.parent.name for path, _ in service_declarations(problems)}
    for role, hosts in settings["roles"].items():
        if role not in ROLES and role not in services:
            problems.append(f"{globals_file}: key 'roles.{role}' is neither a role ({', '.join(ROLES)}) "
                            f"nor a service ({', '.join(sorted(services))})")
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() and " " not in h
                                                  for h in hosts):
            problems.append(f"{globals_file}: key 'roles.{role}' must be a list of minion id patterns")
    release = releases.get(settings["openstack_release"], {})
    if release and not release.get(settings["kolla_install_type"]):
        problems.append(f"{globals_file}: release '{settings['openstack_release']}' has no "
                        f"{settings['kolla_install_type']} images; set kolla_install_type to "
                        f"{'source' if release.get('source') else 'binary'}")
    if release:
        problems.extend(base_problems(release, settings["openstack_release"], settings["kolla_base_distro_version"],
                                      globals_file))
    problems.extend(vip_problems(settings, globals_file))
    problems.extend(tls_problems(settings, globals_file))
    if settings["mariadb_backup_directory"] and not os.path.isabs(settings["mariadb_backup_directory"]):
        problems.append(f"{globals_file}: key 'mariadb_backup_directory' must be an absolute path, got "
                        f"{settings['mariadb_backup_directory']!r}")
    if problems:
        raise ValidationError(problems)
    settings["release_versions"] = release.get("source", {})
    settings["release_constraints"] = release.get("constraints", [])
    settings["release_libraries"] = release.get("libraries", {})
    # An empty base follows each release's default (a pinned service's too): kept apart.
    settings["declared_base_version"] = settings["kolla_base_distro_version"]
    settings["kolla_base_distro_version"] = settings["kolla_base_distro_version"] or release["bases"][0]
    settings["openstack_tag"] = settings["openstack_tag"] or release_tag(settings)
    settings["api_interface"] = settings["api_interface"] or settings["network_interface"]
    settings["kolla_external_fqdn"] = settings["kolla_external_fqdn"] or settings["kolla_external_vip_address"]
    # haproxy's runtime API socket: the haproxy container makes it, blue/green swaps use it.
    settings["haproxy_runtime_directory"] = os.path.join(settings["kolla_state_directory"], "run",
                                                         settings["container_name_prefix"] + "haproxy")
    return settings


def vip_problems(settings, globals_file):
    if not settings["enable_keepalived"]:
        return []
    found = []
    if not settings["enable_haproxy"]:
        found.append(f"{globals_file}: key 'enable_keepalived' is true but 'enable_haproxy' is false: the VIP "
                     f"keepalived moves is haproxy's")
    if str(settings["kolla_internal_vip_address"]).startswith("127."):
        found.append(f"{globals_file}: key 'kolla_internal_vip_address' is {settings['kolla_internal_vip_address']}, "
                     f"a loopback address, which keepalived cannot share between hosts; choose an unused "
                     f"address of the hosts' API network")
    if not 1 <= settings["keepalived_virtual_router_id"] <= 255:
        found.append(f"{globals_file}: key 'keepalived_virtual_router_id' must be 1-255, "
                     f"got {settings['keepalived_virtual_router_id']}")
    return found


def tls_problems(settings, globals_file):
    found = [f"{globals_file}: key '{endpoint.flag}' is true but 'enable_haproxy' is false: haproxy is what "
             f"serves TLS" for endpoint in certificates.enabled(settings) if not settings["enable_haproxy"]]
    if settings["kolla_enable_tls_backend"] and not settings["kolla_copy_ca_into_containers"]:
        found.append(f"{globals_file}: key 'kolla_enable_tls_backend' is true but 'kolla_copy_ca_into_containers' "
                     f"is false: haproxy checks the APIs' certificates against the CA it is given that way")
    if not settings["kolla_enable_tls_external"]:
        return found
    external = settings["kolla_external_vip_address"]
    try:
        ipaddress.ip_address(external)
    except ValueError:
        found.append(f"{globals_file}: key 'kolla_external_vip_address' must be an IP address when "
                     f"kolla_enable_tls_external is true, got {external!r}")
    if external == settings["kolla_internal_vip_address"]:
        found.append(f"{globals_file}: key 'kolla_external_vip_address' is the internal VIP: the internal "
                     f"endpoints are served on the same ports; choose another address")
    return found


# Keys of globals.yml kolla-salt once read under another name: refused, not ignored
# (ignored, the base would silently change under a running cloud).
RENAMED_SETTINGS = {"base_distro": "kolla_base_distro", "base_distro_release": "kolla_base_distro_version"}


def base_problems(release, name, version, where):
    """A problem if the declared base `version` ("" is the release's default) is not one
    release `name` (its releases.yml entry) builds on."""
    if version and version not in release["bases"]:
        return [f"{where}: key 'kolla_base_distro_version' is {version!r}; release {name} builds on "
                f"{', '.join(release['bases'])} (pillar/defaults/releases.yml: bases)"]
    return []


def release_tag(settings):
    """The tag `kolla-salt build` gives a release's images on its base:
    2026.1-source-trixie, zed-bookworm."""
    return (settings["openstack_release"] + ("-source" if settings["kolla_install_type"] == "source" else "")
            + "-" + settings["kolla_base_distro_version"])


def default_tag(release=None):
    """The tag a plain `kolla-salt build` (`--release release`) gives its images."""
    settings = default_settings()
    return release_tag(settings_for_release(settings, release or settings["openstack_release"]))


def default_image(name):
    """The image a plain `kolla-salt build` makes of `name` (what tests and benchmarks run)."""
    return image_ref(default_settings(), name, default_tag())


def settings_for_release(settings, release):
    """Settings as they are for one service that follows `release` (pins.yml, build
    --release): its tag and versions; source images when the release has no binary ones."""
    info = load_releases()[release]
    install_type = settings["kolla_install_type"] if info.get(settings["kolla_install_type"]) else (
        "source" if info.get("source") else "binary")
    declared_base = settings.get("declared_base_version", "")
    problems = base_problems(info, release, declared_base, "globals.yml")
    if problems:
        raise ValidationError(problems)
    changed = dict(settings, openstack_release=release, kolla_install_type=install_type,
                   release_versions=info.get("source", {}), release_constraints=info.get("constraints", []),
                   release_libraries=info.get("libraries", {}),
                   kolla_base_distro_version=declared_base or info["bases"][0])
    changed["openstack_tag"] = release_tag(changed)
    return changed


def load_passwords(config_dir, notes=None):
    """passwords.yml's secrets (strings; a kolla-ansible file's other entries, such as
    SSH key pairs, are left alone) plus the derived ones. Readable by group or others
    (kolla-genpwd writes 0640), the file is made 0600 if this user owns it and nobody
    else may write it (a note in `notes` says so); otherwise it is refused."""
    problems = []
    wanted = wanted_passwords(problems)
    path = Path(config_dir) / "passwords.yml"
    if not path.exists():
        raise ValidationError([f"{path}: missing; run `kolla-salt genpwd` to create it"])
    info = path.stat()
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and not mode & 0o022 and info.st_uid == os.geteuid():
        os.chmod(path, 0o600)
        if notes is not None:
            notes.append(f"{path}: mode was {mode:04o}, made 0600: it holds secrets")
    elif mode & 0o077:
        problems.append(f"{path}: mode is {mode:04o}; it holds secrets and must be 0600 (chmod 600 {path}"
                        f"{'; others could write it: check its contents first' if mode & 0o022 else ''})")
    have = read_yaml(path, problems)
    for key in wanted:
        if not have.get(key):
            problems.append(f"{path}: key '{key}' is missing or empty; run `kolla-salt genpwd`")
        elif not isinstance(have[key], str):
            problems.append(f"{path}: key '{key}' must be a string")
    if problems:
        raise ValidationError(problems)
    passwords = {k: v for k, v in have.items() if isinstance(v, str)}
    return {**passwords, **derived_passwords(passwords)}


# A derived password: (the passwords.yml key it derives from, what it is for).
DERIVED_PASSWORDS = {"keystone_health_password": ("keystone_admin_password", "kolla-salt keystone health user")}


def derived_passwords(passwords):
    """Secrets derived from one passwords.yml has, so that file (a kolla-ansible one
    too) carries over unchanged: HMAC-SHA256 of what it is for, keyed by that secret.
    They are passwords like the others: in the pillar, redacted from all output."""
    return {key: hmac.new(passwords[source].encode(), purpose.encode(), hashlib.sha256).hexdigest()[:32]
            for key, (source, purpose) in DERIVED_PASSWORDS.items()}
