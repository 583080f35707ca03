"""The operator's settings and secrets, with their defaults:

    pillar/defaults/globals.yml + <service>/settings.yml + /etc/kolla-salt/globals.yml -> settings
    <service>/settings.yml (passwords)                  + /etc/kolla-salt/passwords.yml   -> passwords

Every problem is named with its file and key (ValidationError) before anything changes.
"""
import copy
import functools
import hashlib
import hmac
import ipaddress
import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

import yaml

from .. import paths, safeyaml
from ..errors import ValidationError
from ..images.build import image_ref
from ..operations import certificates
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


def check_value(key, default, value, where, problems, rules=()):
    """A value must have the type of its default (bool is not a number), and keep the
    rules of VALUE_RULES and the service folders' (`rules`, without `when`)."""
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
    for rule in rules:
        if rule.key == key and not rule.when and not rule.valid(value):
            problems.append(rule.problem(where, value))
            return False
    return True


# Rules of settings no one service reads (pillar/defaults/globals.yml; a service's own
# settings have theirs in its folder's settings.yml `rules`): (which keys, test, what a value must be).
VALUE_RULES = [
    (lambda key: key.endswith("_port"), lambda v: 0 < v < 65536, "a port number (1-65535)"),
    (lambda key: key.startswith("health_") or key in ("openstack_service_workers", "build_threads"), lambda v: v > 0,
     "greater than 0"),
    (lambda key: key == "health_pressure_limit", lambda v: v <= 1, "a share of time, at most 1"),
    (lambda key: key == "health_slow_timeout_factor", lambda v: v >= 1, "at least 1"),
]


# A rule of a service folder's settings.yml (`rules: {setting: rule}`): one test of
# RULE_TESTS; `unit` (of a number), `what` (what a value must be, in place of the one
# derived from the test; a pattern's must say it), `why` (said after the value), and
# `when` (a true/false setting: the rule holds only while it is true, checked on the
# composed value; the only form a rule on another file's setting may take).
RULE_TESTS = ("choices", "min", "max", "range", "pattern", "not_pattern")
RULE_KEYS = RULE_TESTS + ("unit", "what", "why", "when")


class Rule(NamedTuple):
    key: str
    valid: object        # value -> bool
    what: str
    when: str = ""
    why: str = ""

    def problem(self, where, value):
        when = f" when {self.when} is true" if self.when else ""
        why = f": {self.why}" if self.why else ""
        return f"{where}: key '{self.key}' must be {self.what}{when}, got {value!r}{why}"


def _alternatives(values):
    """'kvm, qemu or empty' of [kvm, qemu, ""]."""
    names = ["empty" if value == "" else str(value) for value in values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rule(key, spec, default):
    """The Rule of a settings.yml's `rules.<key>` (`default`: the setting's default),
    or what is wrong with it (a string)."""
    tests = [test for test in RULE_TESTS if test in spec] if isinstance(spec, dict) else []
    if len(tests) != 1 or set(spec) - set(RULE_KEYS):
        return f"expected a mapping of one test ({', '.join(RULE_TESTS)}) and unit, what, why, when, got {spec!r}"
    if not all(isinstance(spec.get(name, ""), str) for name in ("unit", "what", "why", "when")):
        return "unit, what, why and when must be strings"
    test, limit = tests[0], spec[tests[0]]
    unit = f" {spec['unit']}" if spec.get("unit") else ""
    if test == "choices":
        if not isinstance(limit, list) or not limit:
            return "choices must be a list of the values allowed"
        valid, what = (lambda value: value in limit), _alternatives(limit)
    elif test in ("min", "max", "range"):
        bounds = limit if test == "range" else [limit, None] if test == "min" else [None, limit]
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(_is_number(b) or b is None for b in bounds)
                and (test != "range" or None not in bounds and bounds[0] <= bounds[1]) and _is_number(default)):
            return f"{test} {limit!r}: expected {'[low, high]' if test == 'range' else 'a number'} of a number setting"
        low, high = bounds
        valid = lambda value: (low is None or value >= low) and (high is None or value <= high)
        what = (f"between {low} and {high}" if test == "range" else
                f"at least {low}" if test == "min" else f"at most {high}") + unit
    else:
        try:
            compiled = re.compile(limit) if isinstance(default, str) and isinstance(limit, str) else None
        except re.error as error:
            return f"{test}: {error}"
        if compiled is None or not spec.get("what"):
            return f"{test}: expected a regular expression of a string setting, with `what` saying what it allows"
        valid = lambda value: (compiled.fullmatch(value) is not None) == (test == "pattern")
        what = ""
    return Rule(key, valid, spec.get("what") or what, spec.get("when", ""), spec.get("why", ""))


def value_rules(defaults, origin, problems):
    """[Rule] of every service folder's settings.yml `rules`: each on a setting its
    file declares (or, with `when`, on another declared one); a rule its own default
    breaks, or of an unknown form, is a problem naming the file and key."""
    found = []
    for path, declared in service_declarations([]):     # the files' own problems: _composed said them
        for key, spec in (declared.get("rules") or {}).items():
            where = f"{path}: key 'rules.{key}'"
            when = spec.get("when") if isinstance(spec, dict) else None
            if key not in defaults:
                problems.append(f"{where}: no file declares the setting {key!r}")
                continue
            if origin[key] != path and not when:
                problems.append(f"{where}: the setting is declared in {origin[key]}; a rule on another file's "
                                f"setting needs `when` (a true/false setting it holds under)")
                continue
            if when is not None and not (isinstance(when, str) and isinstance(defaults.get(when), bool)):
                problems.append(f"{where}: when {when!r} is not a declared true/false setting")
                continue
            rule = _rule(key, spec, defaults[key])
            if isinstance(rule, str):
                problems.append(f"{where}: {rule}")
            elif not rule.when and not rule.valid(defaults[key]):
                problems.append(f"{where}: its default {defaults[key]!r} is not {rule.what}")
            else:
                found.append(rule)
    return found


DECLARATION_KEYS = ("set", "after", "settings", "passwords", "rules", "client_files", "database", "says",
                    "host_offers", "base_move")
# What a host offers that a setting may follow (kolla_salt.declaration.virt.Virtualization).
HOST_OFFERS = ("virt_type", "ovs_datapath_type")


def service_declarations(problems):
    """[(path, its content)] of every service folder's settings.yml: its place in the
    container-set tree (`set`, and `after`: the services of its set it comes after),
    the globals.yml keys the service reads with their defaults (`settings`), the
    passwords.yml keys it needs (`passwords`), what a value of its settings must be
    beyond its type (`rules`, value_rules), whether it is the cloud's front door,
    after whose deploy the admin's client files are written (`client_files`), and
    whether it is the cloud's database, which backups copy and restores put back
    (`database`), what `validate` says of it on a host that runs it (`says`),
    which of its settings follow what each host offers (`host_offers`, host_offered),
    and why its containers cannot cross to another base by a swap (`base_move`).
    Read again only when a file changes (its time or size): a pillar's compile asks
    for them several times for every service. What they hold is shared: read it only."""
    files = tuple((path, path.stat().st_mtime_ns, path.stat().st_size)
                  for path in sorted(paths.SERVICES_DIR.glob("*/settings.yml")))
    found, said = _read_declarations(files)
    problems.extend(said)
    return found


@functools.lru_cache(maxsize=4)
def _read_declarations(files):
    found, problems = [], []
    for path, _, _ in files:
        declared = read_yaml(path, problems)
        unknown = sorted(set(declared) - set(DECLARATION_KEYS))
        if unknown:
            problems.append(f"{path}: unknown keys {', '.join(unknown)} ({', '.join(DECLARATION_KEYS)})")
        if not isinstance(declared.get("settings", {}), dict):
            problems.append(f"{path}: key 'settings' must be a mapping of globals.yml keys to their defaults")
        elif not isinstance(declared.get("passwords", []), list) \
                or not all(isinstance(k, str) for k in declared.get("passwords", [])):
            problems.append(f"{path}: key 'passwords' must be a list of passwords.yml keys")
        elif not isinstance(declared.get("rules") or {}, dict):
            problems.append(f"{path}: key 'rules' must be a mapping of settings to their rules")
        elif not all(isinstance(declared.get(key, False), bool) for key in ("client_files", "database")):
            problems.append(f"{path}: keys 'client_files' and 'database' must be true or false")
        elif not isinstance(declared.get("says", ""), str) or not isinstance(declared.get("base_move", ""), str):
            problems.append(f"{path}: keys 'says' and 'base_move' must be lines of text")
        elif offer_problems := _offer_problems(path, declared):
            problems.extend(offer_problems)
        else:
            found.append((path, declared))
    return found, problems


def client_file_services():
    """The services whose settings.yml says `client_files`: a deploy of one writes the
    admin's client files (keystone)."""
    return {path.parent.name for path, declared in _checked(service_declarations, None) if declared.get("client_files")}


def validation_lines(names, settings):
    """What `kolla-salt validate` says of the services `names` on a host whose settings
    are `settings`: each folder's `says`, its {keys} that host's values."""
    said = {path.parent.name: declared["says"] for path, declared in _checked(service_declarations, None)
            if declared.get("says")}
    return [said[name].format(**settings) for name in names if name in said]


def _offer_problems(path, declared):
    offers = declared.get("host_offers") or {}
    if not isinstance(offers, dict):
        return [f"{path}: key 'host_offers' must be a mapping of its settings to what a host offers"]
    problems = []
    for key, offer in offers.items():
        where = f"{path}: key 'host_offers.{key}'"
        if key not in (declared.get("settings") or {}):
            problems.append(f"{where}: the file declares no setting {key!r}")
        elif not isinstance(offer, dict) or offer.get("fact") not in HOST_OFFERS \
                or not isinstance(offer.get("needs", []), list) or set(offer) - {"fact", "needs", "otherwise"}:
            problems.append(f"{where}: expected {{fact: one of {', '.join(HOST_OFFERS)}, needs: [values only a "
                            f"host that offers them takes], otherwise: what to set instead}}")
    return problems


def host_offered(settings, virtualization):
    """{setting: its value on a host offering `virtualization`} of every folder's
    `host_offers`: an empty value is what the host offers (nova_compute_virt_type kvm
    or qemu)."""
    return {key: settings[key] or getattr(virtualization, offer["fact"])
            for _, declared in _checked(service_declarations, None)
            for key, offer in (declared.get("host_offers") or {}).items()}


def host_offer_problems(names, settings, virtualization, where, minion_id):
    """The values of the services `names`' settings that the host `minion_id` does not
    offer (nova_compute_virt_type kvm without KVM), each naming `where` (globals.yml),
    the key, what the host lacks and what to set instead."""
    problems = []
    for path, declared in _checked(service_declarations, None):
        if path.parent.name not in names:
            continue
        for key, offer in (declared.get("host_offers") or {}).items():
            value = settings[key]
            if value in offer.get("needs", []) and getattr(virtualization, offer["fact"]) != value:
                lacks = virtualization.why.removesuffix(": emulation")
                problems.append(f"{where}: key {key!r} is {value}, but {minion_id} has {lacks}"
                                + (f": {offer['otherwise']}" if offer.get("otherwise") else ""))
    return problems


def base_move_routes():
    """{service: why its containers cannot cross to another base by a swap} of the
    folders that say `base_move` (RabbitMQ and MariaDB change major versions with the
    base, by a route of their own)."""
    return {path.parent.name: declared["base_move"] for path, declared in _checked(service_declarations, None)
            if declared.get("base_move")}


def database_service():
    """The service whose settings.yml says `database` (mariadb): the one database
    every service's jobs fill, which backups copy, restores put back and Galera
    recovery founds again. A ValidationError when no folder or more than one says so."""
    found = sorted(path.parent.name for path, declared in _checked(service_declarations, None)
                   if declared.get("database"))
    if len(found) != 1:
        raise ValidationError([f"{paths.SERVICES_DIR}/*/settings.yml: exactly one service folder says "
                               f"'database: true' ({', '.join(found) or 'none does'})"])
    return found[0]


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
            # a copy: the folders' declarations are shared (service_declarations)
            composed[key] = copy.deepcopy(entries[key]) if isinstance(entries, dict) else None
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
    defaults, origin = declared_settings(problems)
    rules = value_rules(defaults, origin, problems)
    globals_file = Path(config_dir) / "globals.yml"
    user = read_yaml(globals_file, problems)
    settings = dict(defaults)
    for key, value in user.items():
        if key not in defaults:
            if warnings is not None and key not in RENAMED_SETTINGS:
                warnings.append(f"{globals_file}: key '{key}' is not used by kolla-salt (ignored)")
            continue
        value = ansible_boolean(value) if isinstance(defaults[key], bool) else value
        if check_value(key, defaults[key], value, f"{globals_file}", problems, rules):
            settings[key] = value
    problems.extend(rule.problem(globals_file, settings[rule.key]) for rule in rules
                    if rule.when and settings[rule.when] is True and not rule.valid(settings[rule.key]))
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
    problems.extend(tls_problems(settings, globals_file))
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


def base_problems(release, name, version, where, key="kolla_base_distro_version"):
    """A problem if the declared base `version` ("" is the release's default) is not one
    release `name` (its releases.yml entry) builds on."""
    if version and version not in release["bases"]:
        return [f"{where}: key {key!r} is {version!r}; release {name} builds on "
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


def service_settings(settings, service, pins):
    """The settings `service` sees: the cloud's, or at its pins.yml release and base."""
    release, base = pins.release_of(service), pins.base_of(service)
    if release in (None, settings["openstack_release"]) and base in (None, settings["kolla_base_distro_version"]):
        return settings
    return settings_for_release(settings, release or settings["openstack_release"], base, service)


def settings_for_release(settings, release, base=None, service=None):
    """Settings as they are for one service that follows `release` (pins.yml, build
    --release), on `base` when given (a pins.yml base: a service held on its base while
    the rest of the cloud moves): its tag and versions; source images when the release
    has no binary ones."""
    info = load_releases()[release]
    install_type = settings["kolla_install_type"] if info.get(settings["kolla_install_type"]) else (
        "source" if info.get("source") else "binary")
    declared_base = base or settings.get("declared_base_version", "")
    problems = (base_problems(info, release, base, "pins.yml", f"services.{service}.base") if base
                else base_problems(info, release, declared_base, "globals.yml"))
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
