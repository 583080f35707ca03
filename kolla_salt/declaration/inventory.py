"""From the operator's files to the pillar every host converges to.

    the settings and passwords (kolla_salt.declaration.settings)                -> settings, passwords
    salt/states/kolla/tree.yaml + <service>/settings.yml (kolla_salt.declaration.tree) -> order
    the host's interfaces (kolla_salt.declaration.hostfacts)                    -> its addresses
    salt/states/kolla/<service>/service.yaml (kolla_salt.declaration.rendering) -> containers, jobs
    salt/states/kolla/<service>/templates/*.j2 + config/<service>/* -> config files
    a folder's loadbalancer: and register: (kolla_salt.containers.balancer,
    kolla_salt.declaration.registration)                                        -> haproxy entries, jobs

Where each service runs across hosts is kolla_salt.declaration.roles'. build_pillar() validates
all of it and reports every problem with its file and key before anything changes;
`kolla-salt validate`, `kolla-salt deploy` and the pillar SLS (pillar/kolla.sls)
call it, so all three agree.
"""

import json
import os
from pathlib import Path

import jinja2
import yaml

from . import virt
from ..containers.balancer import loadbalancer_entries, seconds
from ..containers.spec import CONFIG_MOUNT, ContainerSpec
from ..errors import KollaError, ValidationError
from ..healing.healthloop import beacon_config, restart_settings
from ..images.build import discover, image_base, install_type_problem
from ..operations import certificates, keys as key_repositories
from ..private import used_passwords
from .hostfacts import external_link_problems, host_facts, interface_address, local_interfaces, tunnel_facts
from .merge import merge
from .pins import Pins, changed as changed_passwords, load_pins
from .registration import registration_job
from .rendering import ServiceRenderer, unknown_definition_keys
from .roles import database_facts, host_patterns, placed_on, release_skew, unmet_needs
from .settings import (DERIVED_PASSWORDS, base_move_routes, database_service, host_offer_problems, host_offered,
                       load_passwords, load_settings, service_settings)
from .tree import service_order, waits


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
    (kolla_salt.declaration.pins): services that follow a release of their own, containers held
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
        key = (pins.release_of(service), pins.base_of(service))
        if key not in renderers:
            renderers[key] = ServiceRenderer(service_settings(settings, service, pins), passwords, host)
        return renderers[key]

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
    repositories = key_repositories.declared(images)
    enabled, definitions, addresses, members, forgets = {}, {}, {}, {}, {}
    for top, service in order:
        if not settings.get(f"enable_{service}", False):
            continue
        try:
            enabled[service] = renderer_for(service).definition(service)
        except (jinja2.TemplateError, yaml.YAMLError) as error:
            problems.append(f"salt/states/kolla/{service}/service.yaml: {error}")
            continue
        problems.extend(unknown_definition_keys(service, enabled[service]))
        # What a restore forgets is asked where the database is, whichever hosts run the
        # service that declares it (nova's servers, asked on a mariadb host without nova).
        forgets.update(restore_forgets(enabled[service].get("restore_forgets"),
                                       f"salt/states/kolla/{service}/service.yaml: restore_forgets", problems))
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
        where = f"salt/states/kolla/{service}/service.yaml"
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
                 "base": image_base(renderer.settings),
                 "containers": [], "jobs": [], "post_jobs": [], "final_jobs": [],
                 "caches_database": bool(definition.get("caches_database")),
                 "base_move": base_move_routes().get(service)}
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
        if service == database_service():   # kolla_salt.operations.backup.forgotten asks them in its member
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
        entry["keys"] = service_keys(config_dir, service, repositories.get(service, {}), prefix, problems)
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


def service_keys(config_dir, service, repositories, prefix, problems):
    """The key repositories (`repositories`: kolla_salt.operations.keys.declared's of `service`) a
    service's hosts write into their volumes."""
    found = []
    for name, entry in repositories.items():
        try:
            loaded = key_repositories.load(key_repositories.repository_path(config_dir, service, name))
        except ValidationError as error:
            problems.extend(error.problems)
            continue
        found.append({"volume": prefix + entry["volume"], "owner": entry["owner"],
                      "replace": "rotate" in entry, "keys": loaded})
    return found


def service_specs(service):
    """Every container and job spec of a service entry of the pillar."""
    return [c["spec"] for c in service["containers"]] + service["jobs"] + service["post_jobs"] + service["final_jobs"]


def build_pillar(config_dir, minion_id="local", interfaces=None, warnings=None, peer_interfaces=None,
                 virtualization=None):
    """Everything a host needs, under the key `kolla`. `peer_interfaces`: {minion:
    its interfaces} of every host a master drives (haproxy fronts all of them);
    `virtualization` (kolla_salt.declaration.virt): what the host offers guests (else found here)."""
    settings = load_settings(config_dir, warnings)
    passwords = load_passwords(config_dir, warnings)
    interfaces = interfaces or local_interfaces()
    host = host_facts(settings, interface_address(settings, interfaces))
    virtualization = virtualization or virt.detect()
    host.update(host_offered(settings, virtualization), virtualization=virtualization.describe())
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
    problems = host_offer_problems({s["name"] for s in services}, settings, virtualization,
                                   Path(config_dir) / "globals.yml", minion_id)
    if problems:
        raise ValidationError(problems)
    pillar = {"kolla": {"settings": {**settings, **host}, "passwords": used_passwords(passwords, services),
                        "services": services,
                        "pins": pins.describe()}}
    if settings["enable_health_loop"]:
        # A minion of a salt-master takes its beacons from pillar: the health loop's
        # beacon and restart policy, the same as the all-in-one daemon's.
        pillar.update(beacons={"kolla_health": beacon_config(settings)}, kolla_health=restart_settings(settings))
    return pillar


def compiled(pillar):
    """The `kolla` key of a host's compiled pillar; KollaError naming what kept it from
    compiling (pillar/kolla.sls: the operator's files' problems) when it is not there."""
    if "kolla" not in pillar:
        raise KollaError("the kolla pillar did not compile: " + "; ".join(
            pillar.get("kolla_problems") or pillar.get("_errors") or ["no `kolla` key"]))
    return pillar["kolla"]


def held_password_problems(pins, container, passwords, minion_id, config_dir):
    """A password changed in passwords.yml since a rollback held `container` at a
    generation (kolla_salt.declaration.pins): that generation's config files keep the old one,
    and the jobs would give the new one to the service's users, locking it out."""
    key, pin = pins.container_pin(container, minion_id)
    path = Path(config_dir) / "passwords.yml"
    changed = {DERIVED_PASSWORDS.get(k, (k,))[0] for k in changed_passwords((pin or {}).get("passwords") or {},
                                                                           passwords)}
    return [f"{path}: key '{k}' changed since pins.yml held {key} at what generation {pin['generation']} ran "
            f"({pin.get('why', 'pinned')}); that generation's config files keep the old password: put the old "
            f"one back, or `kolla-salt unpin {key}` to let it follow the files" for k in sorted(changed)]
