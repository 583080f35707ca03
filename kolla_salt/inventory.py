"""From the operator's files to the pillar every host converges to.

    the settings and passwords (kolla_salt.settings)                -> settings, passwords
    salt/states/kolla/tree.yaml + <service>/settings.yml (kolla_salt.tree) -> order
    salt/states/kolla/<service>/defaults.yaml (jinja over settings) -> containers, jobs
    salt/states/kolla/<service>/templates/*.j2 + config/<service>/* -> config files

build_pillar() validates all of it and reports every problem with its file and
key before anything changes; `kolla-salt validate`, `kolla-salt deploy` and the
pillar SLS (pillar/kolla.sls) call it, so all three agree.
"""
import fnmatch
import functools
import json
import os
from pathlib import Path

import jinja2
import yaml

from . import certificates, keys as key_repositories, paths, safeyaml, virt
from .balancer import REQUEST_TIMEOUT, seconds
from .build import discover, image_ref, install_type_problem
from .clouds import keystone_url
from .healthloop import beacon_config, restart_settings
from .errors import ValidationError
from .merge import merge
from .pins import Pins, changed as changed_passwords
from .private import used_passwords
from .releases import load_releases
from .settings import (DERIVED_PASSWORDS, derived_passwords, load_passwords, load_settings,
                       settings_for_release, wanted_passwords)
from .spec import CONFIG_MOUNT, ContainerSpec, is_one_port, is_port, port_pair_problems
from .tree import service_order, waits

def host_patterns(settings, service, definition):
    """Minion id patterns of the hosts that run `service`: `roles.<service>` when the
    operator gives one (kolla-ansible's per-service inventory groups), else those of
    the role(s) its folder names (`role:`, one or a list: a host with any of them; `all`:
    every host some role or roles.<service> names)."""
    return host_patterns_and_key(settings, service, definition)[0]


def placed_on(patterns, minions):
    """The minions of `minions` (in their order) that one of the minion-id `patterns`
    (globals.yml roles) names."""
    return [m for m in minions if any(fnmatch.fnmatch(m, p) for p in patterns)]


def host_patterns_and_key(settings, service, definition):
    """(patterns, the globals.yml key they come from, for messages)."""
    if service in settings["roles"]:
        return settings["roles"][service], f"roles.{service}"
    if definition.get("role") == "all":   # every host given some service, by a role or by roles.<service>
        patterns = [p for patterns in settings["roles"].values() for p in patterns]
        return list(dict.fromkeys(patterns)), "roles"
    roles = definition.get("role", "control")
    roles = [roles] if isinstance(roles, str) else roles
    return [pattern for role in roles for pattern in settings["roles"].get(role, [])], f"roles.{'|'.join(roles)}"


def placement(config_dir):
    """Where each enabled service runs, in tree order: [{service, set, hosts (patterns),
    key (in globals.yml), target (a Salt compound target), rollout (the runner that
    deploys it across hosts instead of a plain state run, or None), serial (deployed
    one host at a time even outside an upgrade), pause (seconds to wait after each host
    when it goes host by host), final (it has jobs that run after every service: the walk's
    last step), balanced (haproxy fronts it: others reach it at kolla_internal_fqdn),
    after (the placed services it waits for: `waits`)}].
    What a master's orchestration walks; it holds no secret and no host's address."""
    settings = load_settings(config_dir)
    definitions = enabled_definitions(settings)
    problems = release_skew(settings, load_pins(config_dir), {service: d for _, service, d in definitions})
    if problems:
        raise ValidationError(problems)
    steps = []
    for top, service, definition in definitions:
        hosts, key = host_patterns_and_key(settings, service, definition)
        if hosts:   # placed on no host: nothing to deploy
            steps.append({"service": service, "set": f"{top}/{service}", "hosts": hosts, "key": key,
                          "target": " or ".join(hosts), "rollout": definition.get("rollout"),
                          "serial": bool(definition.get("serial")),
                          "final": any(job.get("after_every_service") for job in (definition.get("jobs") or {}).values()),
                          "pause": definition.get("pause_between_hosts") or 0,
                          "balanced": bool(definition.get("loadbalancer"))})
    after = waits([step["service"] for step in steps])
    return [dict(step, after=after[step["service"]]) for step in steps]


def apis_out_of_reach(settings, steps, minions, globals_file):
    """Without haproxy a service reaches the APIs at its own host's address (host_facts):
    each host that runs services deployed after an API that does not run there, a
    problem naming them, found before anything changes (on one host there is none)."""
    if settings["enable_haproxy"]:
        return []
    hosts = {step["service"]: placed_on(step["hosts"], minions) for step in steps}
    balanced = [step["service"] for step in steps if step["balanced"]]
    problems = []
    for host in minions:
        here = [step for step in steps if host in hosts[step["service"]]]
        missing = [s for s in balanced if host not in hosts[s] and any(s in step["after"] for step in here)]
        if missing:
            after = [step["service"] for step in here if set(missing) & set(step["after"])]
            problems.append(f"{globals_file}: key 'enable_haproxy' is false, so every service reaches the APIs "
                            f"at its own host's address, but host {host} runs {', '.join(after)} without "
                            f"{', '.join(missing)}: set enable_haproxy and enable_keepalived to true with a "
                            f"kolla_internal_vip_address, or place {', '.join(missing)} on {host} too")
    return problems


def release_skew(settings, pins, definitions):
    """Problems of the services' releases (openstack_release, or a service's pin) with
    the version rules their folders declare (`runs_behind: SERVICE`), across every host."""
    from .releases import load_releases, skew_problems
    declared = {service: pins.release_of(service) or settings["openstack_release"] for service in definitions}
    behind = {service: d["runs_behind"] for service, d in definitions.items() if d.get("runs_behind")}
    return [f"{pins.path.parent}: {problem}" for problem in skew_problems(load_releases(), declared, behind)]


def unmet_needs(enabled, globals_file):
    """Each enabled service without a service its folder says it `needs:` (neutron's
    driver without OVN waits at its start until the deploy times out): a problem
    naming the key to set, found before anything changes."""
    return [f"{globals_file}: key 'enable_{service}' is true, but {service} needs {need} "
            f"(salt/states/kolla/{service}/defaults.yaml: needs): set enable_{need}: true"
            for service, definition in enabled.items() for need in definition.get("needs") or []
            if need not in enabled]


def enabled_definitions(settings):
    """(top-level set, service, its folder's definition) of every enabled service, in
    tree order, rendered without a host and without secrets (what depends on neither:
    where it runs, its images), so no passwords.yml is needed."""
    placeholders = {key: "unused" for key in wanted_passwords()}
    renderer = ServiceRenderer(settings, {**placeholders, **derived_passwords(placeholders)},
                               host_facts(settings, "0.0.0.0"))
    return [(top, service, renderer.definition(service)) for top, service in service_order()
            if settings.get(f"enable_{service}", False)]


def service_images(settings):
    """The images the enabled services run (containers, jobs, registrations): what
    `kolla-salt build` builds when given none (with their parents)."""
    found = set()
    for _, _, definition in enabled_definitions(settings):
        runs = [*(definition.get("containers") or {}).values(), *(definition.get("jobs") or {}).values()]
        found.update(entry["image"] for entry in runs if entry.get("image"))
        if definition.get("register") is not None:
            found.add(REGISTRATION_IMAGE)
    return sorted(found)


def interface_address(settings, interfaces):
    """The IPv4 address of api_interface, from {interface: [addresses]} (grains)."""
    name = settings["api_interface"]
    addresses = interfaces.get(name) or []
    if not addresses:
        raise ValidationError([f"globals.yml: key 'api_interface'/'network_interface' is '{name}', "
                               f"which has no IPv4 address on this host (have: {', '.join(sorted(interfaces))})"])
    return addresses[0]


def tunnel_facts(settings, interfaces, datapath):
    """Where Geneve tunnels end, when not on the API address (host_facts'): the
    address of tunnel_interface (ovn-controller's encap IP) and, with the userspace
    datapath, that link as ovs_tunnel_link: ovs-vswitchd makes it the port of
    ovs_tunnel_bridge and moves its address there (the openvswitch folder), where it
    is found after the first deploy."""
    name, bridge = settings["tunnel_interface"], settings["ovs_tunnel_bridge"]
    if name in ("", settings["api_interface"]):
        if name and datapath == "netdev":
            raise ValidationError([f"globals.yml: key 'tunnel_interface' is '{name}', the API interface: with the "
                                   f"userspace datapath (netdev) its address would move onto the bridge {bridge}; "
                                   f"give the tunnels a link of their own, or leave tunnel_interface empty (one "
                                   f"host needs no tunnel)"])
        return {}
    found = interfaces.get(name) or interfaces.get(bridge)
    if not found:
        raise ValidationError([f"globals.yml: key 'tunnel_interface' is '{name}', which has no IPv4 address on this "
                               f"host, nor has {bridge} (have: {', '.join(sorted(interfaces))})"])
    return {"tunnel_interface_address": found[0], "ovs_tunnel_link": name if datapath == "netdev" else ""}


def external_link_problems(settings, interfaces):
    """neutron_external_interface becomes a port of an Open vSwitch bridge, which takes
    every frame it receives: the link of the host's own addresses (the API's, the
    tunnels') or any link with an address is refused."""
    name = settings["neutron_external_interface"]
    if not name:
        return []
    where = f"globals.yml: key 'neutron_external_interface' is '{name}'"
    if name in (settings["api_interface"], settings["tunnel_interface"]):
        return [f"{where}, the link of this host's API or tunnel address: the provider networks need a link of "
                f"their own (one without an address)"]
    if interfaces.get(name):
        return [f"{where}, which has the address {', '.join(interfaces[name])} on this host: Open vSwitch would "
                f"take its traffic; give the provider networks a link without an address"]
    return []


def host_facts(settings, address):
    """What a host adds to the settings its services are rendered with: its API address,
    and kolla_internal_fqdn (kolla-ansible's name), the address of the API endpoints:
    haproxy's VIP when enable_haproxy, else the host's own."""
    if settings["enable_haproxy"] and settings["kolla_internal_vip_address"] == address:
        raise ValidationError([f"globals.yml: key 'kolla_internal_vip_address' is {address}, this host's API "
                               f"address: haproxy would listen where the API services do; choose another "
                               f"address (on one host a loopback one, such as 127.0.0.10)"])
    internal = settings["kolla_internal_vip_address"] if settings["enable_haproxy"] else address
    external = settings["kolla_enable_tls_external"]
    internal_protocol = "https" if settings["kolla_enable_tls_internal"] else "http"
    return {"api_interface_address": address,
            # Geneve ends on the API address, through no bridge of its own (tunnel_facts
            # says otherwise for a tunnel_interface).
            "tunnel_interface_address": address, "ovs_tunnel_link": "",
            "kolla_internal_fqdn": internal,
            # How services reach each other and keystone (openstack.jinja's internal_url).
            "internal_protocol": internal_protocol,
            # Where the catalog's public endpoints point (a service folder's register:).
            "public_protocol": "https" if external else internal_protocol,
            "public_fqdn": settings["kolla_external_fqdn"] if external else internal,
            # One database server: on the service's own host (build_services says otherwise
            # for a Galera cluster behind haproxy).
            "database_cluster": False, "database_address": address}


def database_facts(settings, passwords, host, peers, minion_id):
    """database_cluster: mariadb runs on more than one host (a Galera cluster);
    database_address: where services reach it, the VIP when haproxy fronts that
    cluster (one writer, failing over: docs/design.md "MariaDB Galera"), else the
    host's own address."""
    if not settings.get("enable_mariadb"):
        return {}
    patterns = host_patterns(settings, "mariadb", ServiceRenderer(settings, passwords, host).definition("mariadb"))
    members = placed_on(patterns, peers or [minion_id])
    cluster = len(members) > 1
    return {"database_cluster": cluster,
            "database_address": settings["kolla_internal_vip_address"] if cluster and settings["enable_haproxy"]
            else host["api_interface_address"]}


@functools.lru_cache(maxsize=None)
def _service_templates():
    """The Jinja environment of the service folders, one per process: it keeps the
    templates it compiled (compiling them was most of a pillar's build time) and
    compiles one again once its file changes. The master builds a pillar for every
    minion of every step, the CLI one for every host. Compiled templates are kept
    between processes too (Jinja's per-user cache folder, mode 0700, keyed by each
    source's checksum): a no-op deploy compiles each of them twice otherwise."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.SERVICES_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             bytecode_cache=jinja2.FileSystemBytecodeCache())
    env.filters["to_json"] = json.dumps
    return env


class ServiceRenderer:
    """Renders a service folder's defaults.yaml and templates against the settings."""

    def __init__(self, settings, passwords, host):
        self.settings, self.passwords, self.host = settings, passwords, host
        self.env = _service_templates()

    def context(self):
        return {**self.settings, **self.passwords, **self.host}

    def image(self, name, container=None):
        """The image a container (or job) runs: its own <container>_tag pins one, else
        its image's <name>_tag, else the release's tag. A container's own tag lets one
        set move alone: nova_compute_tag upgrades compute-operation's nova-compute while
        the control set's nova containers keep nova_tag."""
        return image_ref(self.settings, name,
                         self.settings.get(f"{container}_tag") or self.settings.get(f"{name}_tag"))

    def definition(self, service):
        text = self.env.get_template(f"{service}/defaults.yaml").render(**self.context())
        definition = safeyaml.load(text) or {}
        # Docker's own checks run at one pace for all (health_docker_interval): each
        # costs a process in the container, and the health loop counts their passes.
        for container in (definition.get("containers") or {}).values():
            check = container.get("healthcheck") if isinstance(container, dict) else None
            if isinstance(check, dict):
                check.setdefault("interval", self.settings["health_docker_interval"])
        return definition

    def template(self, service, name, **extra):
        return self.env.get_template(f"{service}/templates/{name}").render(**self.context(), **extra)


def _config_json(container, files):
    return json.dumps({
        "command": container["command"],
        "user": container.get("run_as"),
        "config_files": [{"source": f"/var/lib/kolla/config_files/{name}", "dest": entry["dest"],
                          "owner": entry.get("owner", container.get("run_as") or "root"),
                          "perm": entry.get("perm", "0600")} for name, entry in files],
        "permissions": container.get("permissions", []),
        **({"log_file": container["log_file"]} if container.get("log_file") else {}),
    }, indent=2, sort_keys=True) + "\n"


def _trusting(spec, path):
    """`spec` with the variables that make its Python clients trust the CA at `path`."""
    return {**spec, "environment": {**(spec.get("environment") or {}),
                                    **{variable: path for variable in certificates.CA_VARIABLES}}}


def build_services(settings, passwords, host, config_dir, minion_id="local", pins=None, peers=None,
                   ca_certificate=None):
    """The list of enabled services for this host, each with its container specs,
    jobs and rendered config files, in tree order. Validates everything. `pins`
    (kolla_salt.pins): services that follow a release of their own, containers held
    at a generation. `peers`: {minion: API address} of every host (through a master;
    haproxy fronts the services of all of them), else this host alone.
    `ca_certificate` (kolla_copy_ca_into_containers): the CA every container and job
    trusts."""
    problems = []
    pins = pins or Pins(Path(config_dir) / "pins.yml")
    renderers = {}
    # inventory_hostname (kolla-ansible's name): the host's minion id, its name where a
    # service needs one of its own (OVN's chassis).
    host = {**host, **database_facts(settings, passwords, host, peers, minion_id), "inventory_hostname": minion_id}

    def renderer_for(service):
        release = pins.release_of(service) or settings["openstack_release"]
        if release not in renderers:
            renderers[release] = ServiceRenderer(
                settings if release == settings["openstack_release"] else settings_for_release(settings, release),
                passwords, host)
        return renderers[release]

    overrides_root = Path(config_dir) / "config"
    order = service_order()
    known_services = {s for _, s in order}
    if overrides_root.is_dir():
        for folder in sorted(overrides_root.iterdir()):
            if folder.is_dir() and folder.name not in known_services:
                problems.append(f"{folder}: no service is called '{folder.name}' "
                                f"(services: {', '.join(sorted(known_services))})")
    prefix = settings["container_name_prefix"]
    endpoint_marker = f"://{host['kolla_internal_fqdn']}:"   # in every URL of the internal endpoints
    images = discover()
    enabled, definitions, addresses, members, forgets = {}, {}, {}, {}, {}
    for top, service in order:
        if not settings.get(f"enable_{service}", False):
            continue
        try:
            enabled[service] = renderer_for(service).definition(service)
        except (jinja2.TemplateError, yaml.YAMLError) as error:
            problems.append(f"salt/states/kolla/{service}/defaults.yaml: {error}")
            continue
        # What a restore forgets is asked where the database is, whichever hosts run the
        # service that declares it (nova's servers, asked on a mariadb host without nova).
        forgets.update(restore_forgets(enabled[service].get("restore_forgets"),
                                       f"salt/states/kolla/{service}/defaults.yaml: restore_forgets", problems))
        patterns = host_patterns(settings, service, enabled[service])
        if placed_on(patterns, [minion_id]):
            definitions[service] = enabled[service]
        # The API addresses of the hosts that run it: haproxy's servers.
        candidates = peers or {minion_id: host["api_interface_address"]}
        placed = {m: candidates[m] for m in placed_on(patterns, candidates)}
        addresses[service] = sorted(placed.values())
        members[service] = sorted(placed)
    problems.extend(release_skew(settings, pins, enabled))
    unmet = unmet_needs(enabled, Path(config_dir) / "globals.yml")
    if unmet:   # their files would not render without what they need: say only what to set
        raise ValidationError(problems + unmet)
    balanced = loadbalancer_entries(enabled, addresses, problems, settings["kolla_enable_tls_backend"]) \
        if settings["enable_haproxy"] else {}
    services = []
    for top, service in order:
        if service not in definitions:
            continue
        where = f"salt/states/kolla/{service}/defaults.yaml"
        renderer, definition = renderer_for(service), definitions[service]
        set_path = f"{top}/{service}"
        for image in sorted({c.get("image") for c in (definition.get("containers") or {}).values()} - {None}):
            problem = image in images and install_type_problem(images[image], renderer.settings["kolla_install_type"])
            if problem:
                problems.append(f"{problem}: set enable_{service}: false in globals.yml")
        overrides = {}
        override_dir = overrides_root / service
        if override_dir.is_dir():
            overrides = {p.name: p for p in sorted(override_dir.iterdir()) if p.is_file()}
        used_overrides = set()
        entry = {"name": service, "set": set_path, "release": renderer.settings["openstack_release"],
                 "containers": [], "jobs": [], "post_jobs": [], "final_jobs": []}
        trusting = []   # its containers that trust the CA
        for cname, container in (definition.get("containers") or {}).items():
            cwhere = f"{where}: containers.{cname}"
            files = []
            rendered = {}
            for cfg in container.get("config_files", []):
                name = cfg["template"].removesuffix(".j2")
                try:
                    # stop_timeout: a service's own graceful shutdown must end before Docker kills it.
                    text = renderer.template(service, cfg["template"], loadbalancer=list(balanced.values()),
                                             peers=addresses[service], service_addresses=addresses, container=cname,
                                             ca_file=certificates.CA_IN_CONTAINERS,
                                             stop_timeout=container.get("stop_timeout", ContainerSpec.stop_timeout))
                except jinja2.TemplateError as error:
                    problems.append(f"salt/states/kolla/{service}/templates/{cfg['template']}: {error}")
                    continue
                if name in overrides:
                    used_overrides.add(name)
                    try:
                        text = merge(name, text, overrides[name].read_text(), str(overrides[name]))
                    except ValidationError as error:
                        problems.extend(error.problems)
                files.append((name, cfg))
                rendered[name] = text
            # A container whose config names one of the cloud's endpoints calls it, and one
            # that names the CA's file checks certificates with it (haproxy, the APIs'): it
            # trusts the CA (kolla_start copies it where every user of the container reads
            # it). The others (databases, queues, switches) are left as they are.
            trusts = ca_certificate and any(endpoint_marker in text or certificates.CA_IN_CONTAINERS in text
                                            for text in rendered.values())
            front = balanced.get(container.get("backend"))
            if front and front["backend_tls"]:   # haproxy calls it over TLS (build_pillar checked the PEM)
                files.append((certificates.BACKEND_FILE_NAME, {"dest": certificates.BACKEND_IN_CONTAINERS}))
                rendered[certificates.BACKEND_FILE_NAME] = passwords[certificates.BACKEND.secret]
            if trusts:
                files.append((certificates.CA_FILE_NAME,
                              {"dest": certificates.CA_IN_CONTAINERS, "owner": "root", "perm": "0644"}))
                rendered[certificates.CA_FILE_NAME] = ca_certificate
                trusting.append(cname)
            rendered["config.json"] = _config_json(container, files)
            spec_data = {k: v for k, v in container.items()
                         if k not in ("command", "run_as", "config_files", "permissions", "log_file", "backend")}
            backend = container.get("backend")
            if backend is not None and backend not in (definition.get("loadbalancer") or {}):
                problems.append(f"{cwhere}.backend: '{backend}' is not an entry of this folder's loadbalancer")
            elif backend in balanced:   # behind haproxy: drained before it stops
                front = balanced[backend]
                spec_data["listen"] = {"backend": backend, "address": host["api_interface_address"],
                                       "ports": front["listen_ports"], "drain_timeout": seconds(front["drain_timeout"])}
                if len(front["listen_ports"]) == 2:   # swapped blue/green between its two ports
                    spec_data["swap"] = "blue-green"
            for key in ("reloads", "rechecks"):   # names of other containers, in the folders' terms
                names = spec_data.get(key) or []
                unknown = [n for n in names if not any(n in (d.get("containers") or {}) for d in enabled.values())]
                if unknown:
                    problems.append(f"{cwhere}.{key}: no enabled service has a container {', '.join(unknown)}")
                if names:
                    spec_data[key] = [prefix + n for n in names]
            spec_data.update(name=prefix + cname, image=renderer.image(container["image"], cname), set_path=set_path,
                             config_dir=os.path.join(settings["node_config_directory"], prefix + cname))
            if trusts:
                spec_data = _trusting(spec_data, certificates.CA_IN_CONTAINERS)
            if certificates.BACKEND_FILE_NAME in rendered:
                spec_data["environment"] = {**(spec_data.get("environment") or {}),
                                            certificates.BACKEND_VARIABLE: certificates.BACKEND_IN_CONTAINERS}
            try:
                ContainerSpec.from_dict(spec_data, cwhere)
            except ValidationError as error:
                problems.extend(error.problems)
            entry["containers"].append({"spec": spec_data, "files": rendered,
                                        "pin": pins.generation_of(spec_data["name"], minion_id)})
            problems.extend(held_password_problems(pins, spec_data["name"], passwords, minion_id, config_dir))
        jobs = dict(definition.get("jobs") or {})
        if definition.get("register") is not None:   # a job derived from the folder's register: block
            derived, found = registration_job(service, definition["register"], renderer.settings, passwords, host,
                                              f"{where}: register")
            problems.extend(found)
            if trusting:   # it calls keystone: it gets the folder of a container that trusts the CA
                derived = {name: {**job, "config_from": trusting[0]} for name, job in derived.items()}
            jobs.update(derived)
        # The volumes its jobs fill, on every host of the service (a run_once job runs
        # on one): a restore stops the services that write to the database on each host.
        entry["fills"] = sorted({volume for job in jobs.values() for volume in job.get("fills") or ()})
        if service == "mariadb":   # kolla_salt.backup.forgotten asks them in its member
            entry["restore_forgets"] = forgets
        for jname, job in jobs.items():
            jwhere = f"{where}: jobs.{jname}"
            job = dict(job)
            config_from = job.pop("config_from", None)
            after_containers = job.pop("after_containers", False)
            # After every service of the run, on every host (salt/states/kolla/final.sls):
            # what needs all of them to run the new code (nova's online data migrations
            # wait for the compute hosts).
            after_every_service = job.pop("after_every_service", False)
            if after_containers and after_every_service:
                problems.append(f"{jwhere}: after_containers or after_every_service, not both")
            run_once = job.pop("run_once", None)
            if run_once not in (None, *RUN_ONCE):
                problems.append(f"{jwhere}.run_once: '{run_once}' is not one of {', '.join(RUN_ONCE)}")
            elif run_once and minion_id != members[service][RUN_ONCE[run_once]]:
                continue
            job.update(name=prefix + jname, image=renderer.image(job["image"]), set_path=set_path,
                       restart_policy="no")
            if config_from:
                job["config_dir"] = os.path.join(settings["node_config_directory"], prefix + config_from)
                # In the folder of a container that trusts the CA: started by kolla_start, it
                # finds the CA where its container does; a command of its own (the
                # registration's client, as root) reads it in the mounted folder.
                if config_from in trusting:
                    started = (job.get("command") or [None])[0] == "kolla_start"
                    job = _trusting(job, certificates.CA_IN_CONTAINERS if started
                                    else f"{CONFIG_MOUNT}/{certificates.CA_FILE_NAME}")
            try:
                ContainerSpec.from_dict(job, jwhere)
            except ValidationError as error:
                problems.extend(error.problems)
            entry["final_jobs" if after_every_service else "post_jobs" if after_containers else "jobs"].append(job)
        entry["keys"] = service_keys(config_dir, service, prefix, problems)
        for name in sorted(set(overrides) - used_overrides):
            problems.append(f"{overrides[name]}: {service} has no config file '{name}' "
                            f"(it has: {', '.join(sorted({c['template'].removesuffix('.j2') for cn in (definition.get('containers') or {}).values() for c in cn.get('config_files', [])})) or 'none'})")
        services.append(entry)
    if problems:
        raise ValidationError(problems)
    waiting = waits([entry["name"] for entry in services])
    for entry in services:
        entry["after"] = waiting[entry["name"]]
    return services


def restore_forgets(declared, where, problems):
    """A folder's `restore_forgets`: {what: {query, why}}, the rows a restore to an
    older backup forgets while what they describe lives on outside the database
    (nova's servers keep running on their hosts). `query` is SQL naming each one made
    since the backup, `{taken}` standing for its time (UTC, 'YYYY-MM-DD HH:MM:SS')."""
    declared = declared or {}
    for what, entry in declared.items():
        if not isinstance(entry, dict) or set(entry) != {"query", "why"} or "{taken}" not in str(entry["query"]):
            problems.append(f"{where}.{what}: expected query (SQL with {{taken}}) and why")
    return declared


# A job's run_once: which of the service's hosts (in minion id order) runs it. With a
# `serial` service the first runs it before any other host changes, the last after all.
RUN_ONCE = {"first": 0, "last": -1}


def service_keys(config_dir, service, prefix, problems):
    """The key repositories a service's hosts write into their volumes (kolla_salt.keys)."""
    found = []
    for name, entry in key_repositories.declared().get(service, {}).items():
        try:
            loaded = key_repositories.load(key_repositories.repository_path(config_dir, service, name))
        except ValidationError as error:
            problems.extend(error.problems)
            continue
        found.append({"volume": prefix + entry["volume"], "owner": entry["owner"],
                      "replace": "rotate" in entry, "keys": loaded})
    return found


LOADBALANCER_KEYS = {"port": "the port haproxy listens on, on the VIP",
                     "listen_ports": "the two ports the service's generations listen on in turn "
                                     "(one for a service that is not swapped blue/green)",
                     "check": "the path of haproxy's HTTP check (2xx or 3xx is up)",
                     "timeout": f"optional: client and server timeout of long requests (haproxy syntax, 6h; "
                                f"{REQUEST_TIMEOUT} without); a drain waits as long for the requests in flight",
                     "drain_timeout": "optional: how long a drain waits for the server's sessions to end, when "
                                      "not `timeout` (a database's idle sessions last as long as its clients)",
                     "mode": "optional: http (the default) or tcp (a byte stream, such as the database)",
                     "check_port": "optional: the port that answers the HTTP check, when not the server's own",
                     "one_active": "optional: true sends every connection to the first server up, the others "
                                   "are backups (one writer of a Galera cluster)",
                     "maxconn": "optional: how many requests one server serves at once (its workers); haproxy "
                                "queues the others, so that neither they nor its check wait in the server's backlog",
                     "external_tls_port": "optional: with kolla_enable_tls_external, the port the external VIP "
                                          "serves it on over HTTPS when not `port`; plain HTTP on `port` there is "
                                          "redirected to it (what a browser's http:// address reaches)"}
OPTIONAL_LOADBALANCER_KEYS = ("timeout", "drain_timeout", "mode", "check_port", "one_active", "maxconn",
                              "external_tls_port")


def loadbalancer_entries(definitions, addresses, problems, tls_backend=False):
    """{backend name: entry} from the `loadbalancer:` blocks of the enabled service
    folders (docs/design.md: haproxy), what haproxy's config is made of:

        loadbalancer:
          keystone:                      # frontend and backend name
            port: 5000                   # on the VIP
            listen_ports: [5000, 5001]   # on the host's API address, one per generation
            check: /v3

    Each entry gets `name` and its `servers` (ADDRESS:PORT, kolla_salt.balancer): both
    ports of every address in addresses[service] (the hosts that run it); and
    `backend_tls`: with `tls_backend` (kolla_enable_tls_backend), an HTTP entry whose
    servers are containers of the folder (their `backend:`) is called over TLS."""
    entries = {}
    for service, definition in definitions.items():
        for name, block in (definition.get("loadbalancer") or {}).items():
            where = f"salt/states/kolla/{service}/defaults.yaml: loadbalancer.{name}"
            if not isinstance(block, dict):
                problems.append(f"{where}: expected a mapping with {', '.join(LOADBALANCER_KEYS)}")
                continue
            found = [f"{where}.{key}: required ({meaning})" for key, meaning in LOADBALANCER_KEYS.items()
                     if key not in OPTIONAL_LOADBALANCER_KEYS and block.get(key) in (None, "")]
            found += [f"{where}.{key}: unknown key (known: {', '.join(LOADBALANCER_KEYS)})"
                      for key in block if key not in LOADBALANCER_KEYS]
            ports = block.get("listen_ports")
            if ports is not None and not is_one_port(ports):
                found += port_pair_problems(ports, f"{where}.listen_ports")
            for key in ("timeout", "drain_timeout"):
                try:
                    seconds(block.get(key, REQUEST_TIMEOUT))
                except ValueError as error:
                    found.append(f"{where}.{key}: {error}")
            if block.get("mode", "http") not in ("http", "tcp"):
                found.append(f"{where}.mode: expected http or tcp, got {block['mode']!r}")
            if "maxconn" in block and (isinstance(block["maxconn"], bool) or not isinstance(block["maxconn"], int)
                                         or block["maxconn"] < 1):
                found.append(f"{where}.maxconn: expected a number of requests above 0, got {block['maxconn']!r}")
            for key in ("check_port", "external_tls_port"):
                if key in block and not is_port(block[key]):
                    found.append(f"{where}.{key}: expected a port number, got {block[key]!r}")
            if not isinstance(block.get("one_active", False), bool):
                found.append(f"{where}.one_active: expected true or false, got {block['one_active']!r}")
            if name in entries:
                found.append(f"{where}: another service already has a loadbalancer entry '{name}'")
            if not str(block.get("check", "/")).startswith("/"):
                found.append(f"{where}.check: expected a path starting with /, got {block['check']!r}")
            problems.extend(found)
            if not found:
                timeout = block.get("timeout", REQUEST_TIMEOUT)
                entries[name] = {**block, "name": name, "timeout": timeout,
                                 "drain_timeout": block.get("drain_timeout", timeout),
                                 "mode": block.get("mode", "http"), "check_port": block.get("check_port"),
                                 "maxconn": block.get("maxconn"), "external_tls_port": block.get("external_tls_port"),
                                 "one_active": block.get("one_active", False),
                                 "backend_tls": tls_backend and block.get("mode", "http") == "http" and any(
                                     c.get("backend") == name for c in (definition.get("containers") or {}).values()),
                                 "servers": [f"{address}:{port}" for address in addresses.get(service, [])
                                             for port in ports]}
    return entries


REGISTER_INTERFACES = ("public", "internal", "admin")
REGISTER_REASON = "reaches keystone on the host's API address (docs/design.md: host networking)"


REGISTRATION_IMAGE = "toolbox"   # kolla_keystone_register


def registration_job(service, block, settings, passwords, host, where):
    """({job name: job}, problems): the job that registers `service` with keystone, in
    the form of a folder's `jobs:` (the renderer treats it as one), derived from the
    `register:` block of its folder (docs/design.md: keystone registration):

        register:
          service: {name: glance, type: image, description: OpenStack Image}
          endpoints: {public: URL, internal: URL, admin: URL}     # one or more
          user: {name: glance, password: glance_keystone_password,  # a passwords.yml key
                 project: service, roles: [admin]}                  # these two are the defaults

    The toolbox's kolla_keystone_register runs it with keystone's admin credentials
    and the user's password in its environment (hashed in labels, never printed).
    It fills the database volume keystone's data lives in, and its spec holds all
    it declares: a new declaration, password or keystone database runs it again."""
    problems = []

    def text(data, key, path, default=None):
        value = data.get(key, default) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}.{path}: required, a non-empty string (got {value!r})")
        return value

    def mapping(key, known):
        value = block.get(key)
        if not isinstance(value, dict):
            problems.append(f"{where}.{key}: required, a mapping")
            return {}
        for unknown in sorted(set(value) - set(known)):
            problems.append(f"{where}.{key}.{unknown}: unknown key (known: {', '.join(known)})")
        return value

    if not isinstance(block, dict):
        return {}, [f"{where}: expected a mapping with service, endpoints and user"]
    for unknown in sorted(set(block) - {"service", "endpoints", "user"}):
        problems.append(f"{where}.{unknown}: unknown key (known: endpoints, service, user)")
    declared_service = mapping("service", ("name", "type", "description"))
    endpoints = mapping("endpoints", REGISTER_INTERFACES)
    user = mapping("user", ("name", "password", "project", "roles"))
    name, kind = text(declared_service, "name", "service.name"), text(declared_service, "type", "service.type")
    description = declared_service.get("description", "")
    if not isinstance(description, str):
        problems.append(f"{where}.service.description: expected a string, got {description!r}")
    if not endpoints:
        problems.append(f"{where}.endpoints: at least one of {', '.join(REGISTER_INTERFACES)}")
    for interface, url in endpoints.items():
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            problems.append(f"{where}.endpoints.{interface}: expected an http(s) URL, got {url!r}")
    user_name = text(user, "name", "user.name")
    password_key = text(user, "password", "user.password")
    project = text(user, "project", "user.project", "service")
    # service: the role keystonemiddleware requires of a service token (nova calling
    # neutron or glance with its own token beside the user's is refused without it).
    roles = user.get("roles", ["admin", "service"])
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) and r for r in roles):
        problems.append(f"{where}.user.roles: expected a list of role names, got {roles!r}")
    if isinstance(password_key, str) and password_key.strip() and password_key not in passwords:
        problems.append(f"{where}.user.password: '{password_key}' is not a key of passwords.yml "
                        f"(declare it in salt/states/kolla/{service}/settings.yml: passwords)")
    if not settings.get("enable_keystone", False):
        problems.append(f"{where}: {service} registers with keystone, but globals.yml key "
                        "'enable_keystone' is false")
    if problems:
        return {}, problems
    registration = {"service": {"name": name, "type": kind, "description": description},
                    "endpoints": dict(sorted(endpoints.items())),
                    "user": {"name": user_name, "project": project, "roles": roles}}
    environment = {
        "OS_AUTH_URL": keystone_url({**settings, **host}),
        "OS_USERNAME": settings["keystone_admin_user"],
        "OS_PASSWORD": passwords["keystone_admin_password"],
        "OS_PROJECT_NAME": settings["keystone_admin_project"],
        "OS_REGION_NAME": settings["openstack_region_name"],
        "KOLLA_REGISTRATION": json.dumps(registration, sort_keys=True),
        "KOLLA_SERVICE_PASSWORD": passwords[password_key],
    }
    return {f"{service}_keystone_register": {
        "image": REGISTRATION_IMAGE, "command": ["kolla_keystone_register"], "environment": environment,
        # keystone's data is in the database: a new database volume registers again
        "fills": [f"{settings['container_name_prefix']}mariadb"],
        # the catalog follows the declaration back too (public endpoints without TLS again)
        "converges": True,
        "host_namespaces": ["net"], "reasons": {"net": REGISTER_REASON}}}, []


def service_specs(service):
    """Every container and job spec of a service entry of the pillar."""
    return [c["spec"] for c in service["containers"]] + service["jobs"] + service["post_jobs"] + service["final_jobs"]


def load_pins(config_dir):
    """pins.yml, validated against the services and releases kolla-salt knows."""
    return Pins.load(config_dir, {service for _, service in service_order()}, load_releases())


def build_pillar(config_dir, minion_id="local", interfaces=None, warnings=None, peer_interfaces=None,
                 virtualization=None):
    """Everything a host needs, under the key `kolla`. `peer_interfaces`: {minion:
    its interfaces} of every host a master drives (haproxy fronts all of them);
    `virtualization` (kolla_salt.virt): what the host offers guests (else found here)."""
    settings = load_settings(config_dir, warnings)
    passwords = load_passwords(config_dir, warnings)
    interfaces = interfaces or local_interfaces()
    host = host_facts(settings, interface_address(settings, interfaces))
    virtualization = virtualization or virt.detect()
    host.update(nova_compute_virt_type=settings["nova_compute_virt_type"] or virtualization.virt_type,
                virtualization=virtualization.describe(),
                ovs_datapath_type=settings["ovs_datapath_type"] or virtualization.ovs_datapath_type)
    host.update(tunnel_facts(settings, interfaces, host["ovs_datapath_type"]))
    problems = external_link_problems(settings, interfaces)
    if problems:
        raise ValidationError(problems)
    peers = None
    if peer_interfaces:
        peers = {minion: interface_address(settings, found) for minion, found in peer_interfaces.items() if found}
        peers[minion_id] = host["api_interface_address"]
    pins = load_pins(config_dir)
    for endpoint, path, pem, expiry in certificates.served({**settings, **host}, config_dir):
        # A secret like the passwords: in the pillar of the hosts whose files hold it
        # (haproxy's), blanked out of output.
        passwords = {**passwords, endpoint.secret: pem}
        if warnings is not None and certificates.expiring(expiry):
            warnings.append(f"{path}: expires {expiry:%Y-%m-%d}; `kolla-salt certificates` makes a new one, the "
                            f"next deploy serves it")
    services = build_services(settings, passwords, host, config_dir, minion_id, pins, peers,
                              certificates.trusted_ca(settings, config_dir))
    if settings["nova_compute_virt_type"] == "kvm" and not virtualization.kvm \
            and any(s["name"] == "nova_compute" for s in services):
        raise ValidationError([f"{Path(config_dir) / 'globals.yml'}: key 'nova_compute_virt_type' is kvm, but "
                               f"{minion_id} has {virtualization.why.removesuffix(': emulation')}: set it to "
                               f"qemu (emulation), or leave it empty for what each host offers"])
    pillar = {"kolla": {"settings": {**settings, **host}, "passwords": used_passwords(passwords, services),
                        "services": services,
                        "pins": pins.describe()}}
    if settings["enable_health_loop"]:
        # A minion of a salt-master takes its beacons from pillar: the health loop's
        # beacon and restart policy, the same as the all-in-one daemon's.
        pillar.update(beacons={"kolla_health": beacon_config(settings)}, kolla_health=restart_settings(settings))
    return pillar


def held_password_problems(pins, container, passwords, minion_id, config_dir):
    """A password changed in passwords.yml since a rollback held `container` at a
    generation (kolla_salt.pins): that generation's config files keep the old one,
    and the jobs would give the new one to the service's users, locking it out."""
    key, pin = pins.container_pin(container, minion_id)
    path = Path(config_dir) / "passwords.yml"
    changed = {DERIVED_PASSWORDS.get(k, (k,))[0] for k in changed_passwords((pin or {}).get("passwords") or {},
                                                                           passwords)}
    return [f"{path}: key '{k}' changed since pins.yml held {key} at what generation {pin['generation']} ran "
            f"({pin.get('why', 'pinned')}); that generation's config files keep the old password: put the old "
            f"one back, or `kolla-salt unpin {key}` to let it follow the files" for k in sorted(changed)]


def local_interfaces():
    """{interface: [IPv4 addresses]} of this host, like the ip4_interfaces grain."""
    import subprocess
    out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True).stdout
    return {link["ifname"]: [a["local"] for a in link.get("addr_info", [])] for link in json.loads(out)}
