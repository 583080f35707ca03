"""Pins: what the imperative commands decided, kept in the declared state.

`deploy` converges a host to the operator's files. `upgrade` of some services
and `rollback` are decisions too; they are written to <config_dir>/pins.yml,
beside globals.yml, so that the next deploy keeps them instead of undoing them:

    services:                      # upgrade --services keystone --release 2026.2
      keystone: {release: "2026.2"}
      rabbitmq: {base: bookworm}   # upgrade --base trixie: held on its base (its folder's base_move)
    containers:                    # rollback keystone
      keystone: {generation: 5, why: "rollback to generation 3 (2026-11-23 07:10 UTC)", service: keystone,
                 passwords: {keystone_database_password: "SALT:DIGEST", ...}}
      host2:memcached: {generation: 2, service: memcached, ...}   # rollback host2:memcached through a master

A service pin makes that service follow its own release instead of
openstack_release, or its own base instead of kolla_base_distro_version (a service
whose containers cannot cross bases by a swap, held while the rest moves). A container pin holds the container at one generation of
its history (image, spec and config files) whatever the files say; it names its
service, so that `kolla-salt unpin SERVICE` finds the service's containers held on
any host without asking the hosts. `status` shows them; `kolla-salt unpin NAME`
(or deleting the entry) lets the service or container follow globals.yml again at
the next deploy; an `upgrade` of a service replaces its pins.

A held container keeps the passwords its config files were made with, while jobs
run with passwords.yml's (keystone's bootstrap gives its users the new ones): a
password changed under it would lock it out. So a rollback records a fingerprint
of each password the container uses (salted PBKDF2: it tells a changed password
from the same one without keeping it), and a deploy refuses, naming the key, a
changed one while the pin holds (kolla_salt.declaration.inventory).
"""
import hashlib
import re
import secrets
from pathlib import Path

import yaml

from .. import safeyaml
from ..errors import ValidationError
from ..private import used_passwords, write_private
from .releases import load_releases
from .tree import service_order

FILE = "pins.yml"
FINGERPRINT_ROUNDS = 20000
FINGERPRINT = re.compile(r"(?:[0-9a-f]{2})+:[0-9a-f]+")   # salt (whole bytes) : digest
HEADER = ("# Written by kolla-salt upgrade and rollback: decisions the next deploy keeps.\n"
          "# `kolla-salt unpin NAME` (or deleting an entry) lets NAME follow globals.yml again.\n")


class Pins:
    def __init__(self, path, services=None, containers=None):
        self.path = Path(path)
        self.services = services or {}
        self.containers = containers or {}

    @classmethod
    def load(cls, config_dir, known_services=None, known_releases=None):
        """Reads and validates pins.yml (missing: no pins); every problem names the key."""
        path = Path(config_dir) / FILE
        try:
            data = safeyaml.load(path.read_text()) or {}
        except FileNotFoundError:
            return cls(path)
        except yaml.YAMLError as error:
            raise ValidationError([f"{path}: not valid YAML: {error}"])
        problems = []
        if not isinstance(data, dict):
            raise ValidationError([f"{path}: expected a mapping with 'services' and 'containers'"])
        for key in set(data) - {"services", "containers"}:
            problems.append(f"{path}: unknown key '{key}' (known: services, containers)")
        services = data.get("services") or {}
        containers = data.get("containers") or {}
        for name, pin in (services.items() if isinstance(services, dict) else []):
            pin = pin if isinstance(pin, dict) else {}
            release, base = pin.get("release"), pin.get("base")
            if known_services is not None and name not in known_services:
                problems.append(f"{path}: services.{name}: no service is called '{name}'")
            if set(pin) - {"release", "base"} or not pin:
                problems.append(f"{path}: services.{name} must hold a release, a base or both, got {pin!r}")
            if "release" in pin and (not isinstance(release, str)
                                     or (known_releases is not None and release not in known_releases)):
                problems.append(f"{path}: services.{name}.release must be a known release, got {release!r}")
            if "base" in pin and not isinstance(base, str):
                problems.append(f"{path}: services.{name}.base must be a base (kolla_base_distro_version), "
                                f"got {base!r}")
        for name, pin in (containers.items() if isinstance(containers, dict) else []):
            generation = pin.get("generation") if isinstance(pin, dict) else None
            if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
                problems.append(f"{path}: containers.{name}.generation must be a generation number, "
                                f"got {generation!r}")
            service = pin.get("service") if isinstance(pin, dict) else None
            if service is not None and known_services is not None and service not in known_services:
                problems.append(f"{path}: containers.{name}.service: no service is called {service!r}")
            recorded = pin.get("passwords", {}) if isinstance(pin, dict) else {}
            if not isinstance(recorded, dict) or not all(
                    isinstance(value, str) and FINGERPRINT.fullmatch(value) for value in recorded.values()):
                problems.append(f"{path}: containers.{name}.passwords must map password keys to the "
                                f"fingerprints a rollback wrote (SALT:DIGEST)")
        if not isinstance(services, dict) or not isinstance(containers, dict):
            problems.append(f"{path}: 'services' and 'containers' must be mappings")
        if problems:
            raise ValidationError(problems)
        return cls(path, services, containers)

    def release_of(self, service):
        return (self.services.get(service) or {}).get("release")

    def base_of(self, service):
        return (self.services.get(service) or {}).get("base")

    def generation_of(self, container, host=None):
        """The generation `container` is held at: on `host` (a rollback through a master
        pins HOST:CONTAINER), else wherever it runs (a rollback on the host itself)."""
        return (self.container_pin(container, host)[1] or {}).get("generation")

    def container_pin(self, container, host=None):
        """(key in pins.yml, its entry) holding `container` on `host`, else (None, None)."""
        for key in ([f"{host}:{container}"] if host else []) + [container]:
            if key in self.containers:
                return key, self.containers[key]
        return None, None

    def release(self, name, services, service_of):
        """Removes the pins of `name`: a service (in `services`) loses its release pin and
        the pins of its containers on every host; a container loses its pins, on every
        host (`CONTAINER`) or on one (`HOST:CONTAINER`). `service_of(key)` names the
        service of a container pin that does not record it (pins.yml of an earlier
        kolla-salt). Returns the keys removed."""
        removed = [f"services.{name}"] if name in services and self.services.pop(name, None) else []
        return removed + self._drop(lambda key, pin: _holds(key, name) or (
            name in services and (pin.get("service") or service_of(key)) == name))

    def forget_releases(self):
        """Every service follows openstack_release again (a base pin stays)."""
        self._unpin(lambda key, value: key == "release")

    def drop_followed(self, release, base):
        """Drops what a service pin holds that every service follows anyway (`release`,
        `base`), and the pins left empty."""
        self._unpin(lambda key, value: value == {"release": release, "base": base}[key])

    def _unpin(self, dropped):
        for name, pin in list(self.services.items()):
            for key in [key for key, value in pin.items() if dropped(key, value)]:
                del pin[key]
            if not pin:
                del self.services[name]

    def release_container(self, name):
        """Removes the pins of container `name` on every host (an upgrade replaces them);
        returns the keys removed."""
        return self._drop(lambda key, pin: _holds(key, name))

    def _drop(self, matches):
        keys = [key for key, pin in self.containers.items() if matches(key, pin)]
        for key in keys:
            del self.containers[key]
        return [f"containers.{key}" for key in keys]

    def describe(self):
        """One line per pin, for people."""
        return ([f"{name} follows " + " on ".join(f"{key} {pin[key]}" for key in ("release", "base") if key in pin)
                 for name, pin in sorted(self.services.items())]
                + [f"{name} held at what generation {pin['generation']} ran ({pin.get('why', 'pinned')})"
                   for name, pin in sorted(self.containers.items())])

    def save(self):
        """Writes pins.yml; without pins the file is removed, so nothing is left to read."""
        data = {key: value for key, value in (("services", self.services), ("containers", self.containers))
                if value}
        if not data:
            self.path.unlink(missing_ok=True)
            return
        write_private(self.path, HEADER + yaml.safe_dump(data, default_flow_style=False, sort_keys=True))


def _holds(key, container):
    """Whether the pins.yml key `key` holds `container`: on this host (CONTAINER) or on
    one through a master (HOST:CONTAINER); a key HOST:CONTAINER holds only itself."""
    return key == container or key.endswith(":" + container)


def pin_facts(kolla, name):
    """What a pin of container `name` records beside its generation, from the `kolla`
    pillar of its host: its service (for `unpin SERVICE`) and the fingerprints of the
    passwords it uses (its files and spec: a deploy refuses to change one under a held
    container)."""
    names = {name, kolla["settings"]["container_name_prefix"] + name}
    held = [(service["name"], c) for service in kolla["services"] for c in service["containers"]
            if c["spec"]["name"] in names]
    passwords = fingerprints(used_passwords(kolla["passwords"], [c for _, c in held]))
    return {**({"service": held[0][0]} if held else {}), **({"passwords": passwords} if passwords else {})}


def fingerprints(passwords):
    """{key: SALT:DIGEST} of each password, for a pin (one salt per pin)."""
    salt = secrets.token_hex(8)
    return {key: f"{salt}:{_digest(value, salt)}" for key, value in sorted(passwords.items())}


def changed(fingerprinted, passwords):
    """The keys of `fingerprinted` (a pin's) whose password in `passwords` differs or is gone."""
    def differs(key, fingerprint):
        salt, _, digest = fingerprint.partition(":")
        return key not in passwords or _digest(passwords[key], salt) != digest
    return sorted(key for key, fingerprint in fingerprinted.items() if differs(key, fingerprint))


def _digest(password, salt):
    return hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), FINGERPRINT_ROUNDS).hex()[:32]


def load_pins(config_dir):
    """pins.yml, validated against the services and releases kolla-salt knows."""
    return Pins.load(config_dir, {service for _, service in service_order()}, load_releases())
