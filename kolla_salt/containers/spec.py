"""The declarative container record and how two of them differ.

A ContainerSpec is what an SLS declares for one container. It is validated
with errors that name the key, normalised (capability names, namespaces,
health check units) and reduced to a canonical form whose hash goes into the
container's labels. Comparing canonical forms, not what Docker reports back,
decides whether a container must change: no endless re-creation when the
engine adds a field, and a readable diff for the operator.
"""
import hashlib
import json
from dataclasses import MISSING, dataclass, field, fields

from ..errors import ValidationError

HOST_NAMESPACES = ("net", "pid", "ipc", "uts")
RESTART_POLICIES = ("always", "unless-stopped", "on-failure", "no")
# How a new generation replaces a running one (kolla_salt.containers.manager):
#   stop-first  stop the old, start the new (services that cannot share their port)
#   overlap     start the new beside the old, switch once it is healthy: for services
#               that listen with SO_REUSEPORT, so both serve the port meanwhile
#   blue-green  behind haproxy (`listen`): the new one listens on the other of two
#               ports; haproxy drains the old one before it stops (kolla_salt.containers.balancer)
# Any container behind haproxy (`listen`) is drained in every haproxy before it stops.
SWAP_MODES = ("stop-first", "overlap", "blue-green")
CONFIG_MOUNT = "/var/lib/kolla/config_files"

# Labels every managed container carries.
LABEL_NAME = "kolla.name"            # the container's managed name
LABEL_SET = "kolla.set"              # its path in the container-set tree
LABEL_GENERATION = "kolla.generation"
LABEL_SPEC_HASH = "kolla.spec-hash"
LABEL_SPEC = "kolla.spec"            # canonical spec, environment values hashed
LABEL_CONFIG_HASH = "kolla.config-hash"
LABEL_JOB = "kolla.job"
LABEL_RELEASE = "kolla.release"        # on images whose content depends on the release
LABEL_BASE = "kolla.base"              # on every image: the distribution it is built on (debian-trixie)
LABEL_LISTEN_PORT = "kolla.listen-port"  # the port a blue-green generation listens on
LABEL_VOLUME_ID = "kolla.volume-id"  # a named volume's identity: a recreated volume has a new one

# Not part of a container's identity (spec_hash): the image is compared by its id,
# so one image tagged for two releases recreates nothing; the config folder is
# compared by the hash of its files, wherever it is (a rollback reads a snapshot).
# forward_only is a rule about the container's releases, converges about when a job
# runs: neither is how it runs.
OUTSIDE_IDENTITY = ("image", "config_dir", "forward_only", "converges")
# Fields added after containers were deployed: left out of the canonical form at
# their default, so a container that does not use one keeps its spec hash (and
# is not recreated by the kolla-salt version that added it).
ADDED_LATER = ("stateful", "cluster", "listen", "on_destroy", "reloads", "before_stop", "rechecks", "forward_only",
               "converges", "in_use")


def named(name, prefix, lookup):
    """(the name `lookup` found something under, what it found) for a container named
    by an operator as given or with container_name_prefix `prefix`; (`name`, None)
    when neither finds anything."""
    for candidate in dict.fromkeys([name, prefix + name]):
        found = lookup(candidate)
        if found:
            return candidate, found
    return name, None


def declared_spec(labels):
    """The canonical spec a managed container was created with (its kolla.spec
    label), as a dict; {} when the label is missing or unreadable."""
    try:
        return json.loads((labels or {}).get(LABEL_SPEC) or "{}")
    except ValueError:
        return {}


@dataclass(frozen=True)
class HealthCheck:
    test: tuple            # a command run in the container (CMD form)
    interval: int = 10     # seconds
    timeout: int = 5
    retries: int = 3
    start_period: int = 5

    def to_docker(self):
        """The Docker SDK wants nanoseconds."""
        ns = 1_000_000_000
        return {"test": ["CMD", *self.test], "interval": self.interval * ns,
                "timeout": self.timeout * ns, "retries": self.retries,
                "start_period": self.start_period * ns}


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    set_path: str = ""
    command: tuple | None = None
    environment: dict = field(default_factory=dict)
    volumes: tuple = ()               # "source:dest[:ro]"; source absolute = bind mount, else named volume
    host_namespaces: tuple = ()       # subset of HOST_NAMESPACES
    privileged: bool = False
    cap_add: tuple = ()
    devices: tuple = ()
    user: str | None = None
    restart_policy: str = "always"
    healthcheck: HealthCheck | None = None
    labels: dict = field(default_factory=dict)
    reasons: dict = field(default_factory=dict)   # why each namespace/capability/privilege is needed
    stop_timeout: int = 10
    swap: str = "stop-first"          # one of SWAP_MODES
    config_dir: str | None = None     # host folder mounted read-only at CONFIG_MOUNT
    # Jobs: named volumes the job fills without mounting them (a database job fills
    # the database's volume). A job runs again when one of them (or one it mounts)
    # is not the volume it filled last time: removed, recreated or missing.
    fills: tuple = ()
    # The health loop (kolla_salt.healing.health): a stateful container (a database, a
    # broker) is restarted only on a certain hang, never because it is slow;
    # members of one cluster (same key) on one engine are never restarted two at once
    # (across hosts: not yet, docs/design.md).
    stateful: bool = False
    cluster: str = ""
    # Behind haproxy: {backend: haproxy backend, address, ports, drain_timeout}. Swapped
    # blue-green, ports are two and each generation listens on the one its predecessor
    # did not (KOLLA_LISTEN_PORT); otherwise one port (a Galera member).
    listen: dict = field(default_factory=dict)
    # A command `kolla-salt destroy` runs in the container before removing it: for
    # what the container made outside itself that would outlive it (libvirt's guests,
    # Open vSwitch's bridge devices).
    on_destroy: tuple = ()
    # A command that prints what still uses the container, one item a line (libvirt:
    # the servers it runs): a deploy that no longer declares the container keeps it
    # while it prints something (an implicit removal would take them with it).
    in_use: tuple = ()
    # Containers on this engine whose processes start again once a new generation of
    # this one serves (an upgrade, a rollback): they hold something they worked out
    # from it once and must work out again (nova's control services: the RPC version
    # of the oldest nova-compute, [upgrade_levels] compute = auto). SIGHUP, or behind
    # haproxy a new generation alike, blue/green (ContainerManager._reload).
    reloads: tuple = ()
    # Containers on this engine that lose their connection to this one when it is
    # replaced and make it again on their own: a swap of this one is complete once
    # they pass their checks again (libvirt: nova-compute, which nova disables while
    # it has no libvirt, so that no server can be scheduled to the host meanwhile).
    rechecks: tuple = ()
    # A command run in the container before it is stopped (a swap's old generation,
    # `kolla-salt stop`): what it serves moves elsewhere first (rabbitmq: drain).
    before_stop: tuple = ()
    # Why a rollback may not take this container back to an older release (nova records
    # each service's version in its database and refuses an older one); empty: it may.
    forward_only: str = ""
    # A job that makes something match its declaration (keystone's catalog): it runs
    # whenever its spec differs from its last successful run's, even going back to one
    # it ran before (ContainerManager.job_pending); a migration does not.
    converges: bool = False

    # -- construction -----------------------------------------------------------
    @classmethod
    def from_dict(cls, data, where):
        """Builds a spec from pillar/SLS data; `where` names its origin in errors."""
        problems = []
        if not isinstance(data, dict):
            raise ValidationError([f"{where}: expected a mapping, got {type(data).__name__}"])
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                problems.append(f"{where}.{key}: unknown key (known: {', '.join(sorted(known))})")

        def get(key, kind, default=None, convert=None):
            value = data.get(key, default)
            if value is None or isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
                return convert(value) if convert and value is not None else value
            problems.append(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, "
                            f"got {type(value).__name__} {value!r}")
            return default

        def text_list(key):
            value = data.get(key) or []
            if isinstance(value, str) and key == "command":
                return (value,)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) for v in value):
                problems.append(f"{where}.{key}: expected a list of strings, got {value!r}")
                return ()
            return tuple(str(v) for v in value)

        def str_map(key):
            value = data.get(key) or {}
            if not isinstance(value, dict):
                problems.append(f"{where}.{key}: expected a mapping, got {type(value).__name__}")
                return {}
            out = {}
            for k, v in value.items():
                if isinstance(v, (dict, list)) or v is None:
                    problems.append(f"{where}.{key}.{k}: expected a scalar value, got {v!r}")
                else:
                    out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
            return out

        name = get("name", str)
        image = get("image", str)
        if not name:
            problems.append(f"{where}.name: required")
        if not image:
            problems.append(f"{where}.image: required")
        namespaces = text_list("host_namespaces")
        for ns in namespaces:
            if ns not in HOST_NAMESPACES:
                problems.append(f"{where}.host_namespaces: '{ns}' is not one of {', '.join(HOST_NAMESPACES)}")
        restart = get("restart_policy", str, "always")
        if restart not in RESTART_POLICIES:
            problems.append(f"{where}.restart_policy: '{restart}' is not one of {', '.join(RESTART_POLICIES)}")
        volumes = text_list("volumes")
        for volume in volumes:
            parts = volume.split(":")
            if len(parts) not in (2, 3) or not parts[1].startswith("/") or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
                problems.append(f"{where}.volumes: '{volume}' is not SOURCE:/DEST[:ro|rw]")
        caps = tuple(sorted({normalise_capability(c) for c in text_list("cap_add")}))
        privileged = get("privileged", bool, False)
        reasons = str_map("reasons")
        for needs in [*namespaces, *caps, *(["privileged"] if privileged else [])]:
            if needs not in reasons:
                problems.append(f"{where}.reasons.{needs}: missing; say why the container needs it")
        healthcheck = None
        raw_check = data.get("healthcheck")
        if raw_check is not None:
            if not isinstance(raw_check, dict) or not raw_check.get("test"):
                problems.append(f"{where}.healthcheck: expected a mapping with a 'test' command")
            else:
                check_where = f"{where}.healthcheck"
                numbers = {}
                for key in ("interval", "timeout", "retries", "start_period"):
                    if key in raw_check:
                        value = raw_check[key]
                        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                            problems.append(f"{check_where}.{key}: expected a whole number of seconds, got {value!r}")
                        else:
                            numbers[key] = value
                test = raw_check["test"]
                healthcheck = HealthCheck(test=tuple(test) if isinstance(test, list) else (str(test),), **numbers)
        stop_timeout = get("stop_timeout", int, ContainerSpec.stop_timeout)
        swap = get("swap", str, "stop-first")
        if swap not in SWAP_MODES:
            problems.append(f"{where}.swap: '{swap}' is not one of {', '.join(SWAP_MODES)}")
        command = text_list("command") if data.get("command") is not None else None
        stateful, cluster = get("stateful", bool, False), get("cluster", str, "") or ""
        listen = get("listen", dict, {}) or {}
        if swap == "blue-green" or listen:
            problems.extend(_listen_problems(listen, swap, f"{where}.listen"))
        if problems:
            raise ValidationError(problems)
        return cls(
            name=name, image=image, set_path=get("set_path", str, "") or "", command=command,
            environment=str_map("environment"), volumes=volumes, host_namespaces=tuple(sorted(set(namespaces))),
            privileged=privileged, cap_add=caps, devices=text_list("devices"), user=get("user", str),
            restart_policy=restart, healthcheck=healthcheck, labels=str_map("labels"), reasons=reasons,
            stop_timeout=stop_timeout, swap=swap, config_dir=get("config_dir", str), fills=text_list("fills"),
            stateful=stateful, cluster=cluster, listen=listen, on_destroy=text_list("on_destroy"),
            in_use=text_list("in_use"), reloads=text_list("reloads"), before_stop=text_list("before_stop"),
            rechecks=text_list("rechecks"), forward_only=get("forward_only", str, "") or "", converges=bool(get("converges", bool, False)))

    # -- identity ---------------------------------------------------------------
    def canonical(self):
        """Plain, ordered data; environment values are hashed so labels leak no secret."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ADDED_LATER and value == (f.default if f.default is not MISSING else f.default_factory()):
                continue
            if f.name == "environment":
                value = {k: _short_hash(v) for k, v in sorted(value.items())}
            elif f.name == "healthcheck" and value is not None:
                value = {"test": list(value.test), "interval": value.interval, "timeout": value.timeout,
                         "retries": value.retries, "start_period": value.start_period}
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = json.loads(json.dumps(value, sort_keys=True))
            out[f.name] = value
        return out

    def identity(self):
        """The canonical form without what is compared otherwise (OUTSIDE_IDENTITY)."""
        return {k: v for k, v in self.canonical().items() if k not in OUTSIDE_IDENTITY}

    def spec_hash(self):
        return _short_hash(json.dumps(self.identity(), sort_keys=True))

    def named_volumes(self):
        """Named volumes it mounts (a bind mount's source is an absolute path)."""
        return tuple(v.split(":")[0] for v in self.volumes if not v.startswith("/"))


def is_port(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def is_one_port(ports):
    """The ports of a service behind haproxy that is not swapped blue/green: one port."""
    return isinstance(ports, list) and len(ports) == 1 and is_port(ports[0])


def port_pair_problems(ports, where):
    """The two ports a blue-green service listens on in turn (a spec's listen.ports, a
    service folder's loadbalancer listen_ports): two different port numbers."""
    if isinstance(ports, list) and len(ports) == 2 and ports[0] != ports[1] and all(is_port(p) for p in ports):
        return []
    return [f"{where}: expected two different port numbers, got {ports!r}"]


def _listen_problems(listen, swap, where):
    problems = [f"{where}.{key}: required" for key in ("backend", "address", "ports") if not listen.get(key)]
    ports = listen.get("ports")
    if ports is not None and swap == "blue-green":
        problems.extend(port_pair_problems(ports, f"{where}.ports"))
    elif ports is not None and not is_one_port(ports):
        problems.append(f"{where}.ports: expected one port number (a '{swap}' swap listens on one), got {ports!r}")
    drain_timeout = listen.get("drain_timeout", 1)
    if not isinstance(drain_timeout, int) or isinstance(drain_timeout, bool) or drain_timeout < 1:
        problems.append(f"{where}.drain_timeout: expected a number of seconds, got {drain_timeout!r}")
    known = ("address", "backend", "drain_timeout", "ports")
    unknown = sorted(set(listen) - set(known))
    if unknown:
        problems.append(f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(known)})")
    return problems


def normalise_capability(name):
    name = str(name).upper()
    return name[4:] if name.startswith("CAP_") else name


def _short_hash(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def diff(old, new):
    """Readable differences between the identities of two canonical specs:
    {field: 'old -> new'} (the image and config files are compared by their hashes).

    Environment changes name the keys only: values may be secrets.
    """
    changes = {}
    for key in sorted((set(old) | set(new)) - set(OUTSIDE_IDENTITY)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "environment":
            before, after = before or {}, after or {}
            keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            changes[key] = "changed: " + ", ".join(
                f"{k} ({'added' if k not in before else 'removed' if k not in after else 'new value'})" for k in keys)
        else:
            changes[key] = f"{json.dumps(before, sort_keys=True)} -> {json.dumps(after, sort_keys=True)}"
    return changes


def config_hash(files):
    """Hash of a container's rendered config files, {relative name: text}."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()[:16]
