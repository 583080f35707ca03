"""Where each enabled service runs: globals.yml's roles (kolla-ansible's inventory
groups) matched against the minions, the walk a master's orchestration follows
(placement), and the checks that need every host at once (APIs out of reach, the
services' release skew, unmet needs, a Galera cluster)."""
import fnmatch

from ..errors import ValidationError
from ..images.build import image_base
from .hostfacts import host_facts
from .pins import load_pins
from .registration import REGISTRATION_IMAGE, registration_outline
from .rendering import ServiceRenderer
from .settings import database_service, derived_passwords, load_settings, service_settings, wanted_passwords
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
    database (it is the cloud's database: settings.database_service),
    after (the placed services it waits for: `waits`)}].
    What a master's orchestration walks; it holds no secret and no host's address."""
    settings = load_settings(config_dir)
    definitions = enabled_definitions(settings)
    problems = release_skew(settings, load_pins(config_dir), {service: d for _, service, d, _ in definitions})
    if problems:
        raise ValidationError(problems)
    steps, database = [], database_service()
    for top, service, definition, _ in definitions:
        hosts, key = host_patterns_and_key(settings, service, definition)
        if hosts:   # placed on no host: nothing to deploy
            steps.append({"service": service, "set": f"{top}/{service}", "hosts": hosts, "key": key,
                          "target": " or ".join(hosts), "rollout": definition.get("rollout"),
                          "serial": bool(definition.get("serial")),
                          "final": any(job.get("after_every_service") for job in (definition.get("jobs") or {}).values()),
                          "pause": definition.get("pause_between_hosts") or 0,
                          "balanced": bool(definition.get("loadbalancer")),
                          "database": service == database})
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
            f"(salt/states/kolla/{service}/service.yaml: needs): set enable_{need}: true"
            for service, definition in enabled.items() for need in definition.get("needs") or []
            if need not in enabled]


def _renderer_without_secrets(settings):
    """A renderer of the folders' definitions without a host and without secrets: what
    depends on neither (where a service runs, its containers' names and images), so no
    passwords.yml is needed."""
    placeholders = {key: "unused" for key in wanted_passwords()}
    return ServiceRenderer(settings, {**placeholders, **derived_passwords(placeholders)},
                           host_facts(settings, "0.0.0.0"))


def enabled_definitions(settings, pins=None):
    """(top-level set, service, its folder's definition, its renderer) of every enabled
    service, in tree order, each at its release (a pins.yml release, else
    openstack_release), rendered by _renderer_without_secrets."""
    renderers = {}
    found = []
    for top, service in service_order():
        if not settings.get(f"enable_{service}", False):
            continue
        key = (pins.release_of(service), pins.base_of(service)) if pins else (None, None)
        if key not in renderers:
            renderers[key] = _renderer_without_secrets(service_settings(settings, service, pins) if pins else settings)
        found.append((top, service, renderers[key].definition(service), renderers[key]))
    return found


def client_lists(settings):
    """{keystone service type: the path after its public endpoint that lists what a
    user's client lists most} of the enabled services' folders (`lists`): the load a
    user puts on the APIs, as the load tests and benchmarks make it."""
    return {kind: path for _, _, definition, _ in enabled_definitions(settings)
            for kind, path in (definition.get("lists") or {}).items()}


def declared_services(settings, pins, minion_id):
    """The services the declaration places on host `minion_id`, in tree order, in the
    shape of the pillar's entries as far as the checks before a deploy read them
    (kolla_salt.declaration.releases.release_path_problems, kolla_salt.declaration.preflight.missing_images,
    kolla_salt.operations.backup.back_first): name, set, release, base, containers ({spec: {name,
    image}, pin}), jobs ({name, image}) and fills; refused when the releases break a
    folder's version rule (release_skew). Derived from the folders' definitions
    alone: no config file is rendered and no secret read, so a command that declares
    before Salt compiles the pillar (an upgrade on one host) knows what the
    declaration names without compiling it."""
    prefix = settings["container_name_prefix"]
    definitions = enabled_definitions(settings, pins)
    problems = release_skew(settings, pins, {service: definition for _, service, definition, _ in definitions})
    if problems:
        raise ValidationError(problems)
    services = []
    for top, service, definition, renderer in definitions:
        if not placed_on(host_patterns(settings, service, definition), [minion_id]):
            continue
        jobs = dict(definition.get("jobs") or {})
        if definition.get("register") is not None:   # its derived job (kolla_salt.declaration.registration)
            name, outline = registration_outline(service, prefix)
            jobs[name] = outline
        containers = [{"spec": {"name": prefix + name, "image": renderer.image(container["image"], name)},
                       "pin": pins.generation_of(prefix + name, minion_id)}
                      for name, container in (definition.get("containers") or {}).items()]
        services.append({"name": service, "set": f"{top}/{service}", "release": renderer.settings["openstack_release"],
                         "base": image_base(renderer.settings), "containers": containers,
                         "jobs": [{"name": prefix + name, "image": renderer.image(job["image"])}
                                  for name, job in jobs.items()],
                         "post_jobs": [], "final_jobs": [],
                         "fills": sorted({volume for job in jobs.values() for volume in job.get("fills") or ()})})
    return services


def service_images(settings):
    """The images the enabled services run (containers, jobs, registrations): what
    `kolla-salt build` builds when given none (with their parents)."""
    found = set()
    for _, _, definition, _ in enabled_definitions(settings):
        runs = [*(definition.get("containers") or {}).values(), *(definition.get("jobs") or {}).values()]
        found.update(entry["image"] for entry in runs if entry.get("image"))
        if definition.get("register") is not None:
            found.add(REGISTRATION_IMAGE)
    return sorted(found)


def database_facts(settings, passwords, host, peers, minion_id):
    """database_cluster: the database (mariadb) runs on more than one host (a Galera cluster);
    database_address: where services reach it, the VIP when haproxy fronts that
    cluster (one writer, failing over: docs/design.md "MariaDB Galera"), else the
    host's own address."""
    database = database_service()
    if not settings.get(f"enable_{database}"):
        return {}
    patterns = host_patterns(settings, database, ServiceRenderer(settings, passwords, host).definition(database))
    members = placed_on(patterns, peers or [minion_id])
    cluster = len(members) > 1
    return {"database_cluster": cluster,
            "database_address": settings["kolla_internal_vip_address"] if cluster and settings["enable_haproxy"]
            else host["api_interface_address"]}
