"""A service's registration with keystone (its folder's `register:` block): the job
that makes its catalog entry, endpoints and user."""
import json

from ..operations.clouds import keystone_url


REGISTER_INTERFACES = ("public", "internal", "admin")
REGISTER_REASON = "reaches keystone on the host's API address (docs/design.md: host networking)"
REGISTRATION_IMAGE = "toolbox"   # kolla_keystone_register


def registration_outline(service, prefix):
    """(name, {image, fills}) of `service`'s registration job, what depends on no secret
    and no host (kolla_salt.declaration.roles.declared_services reads it). keystone's data is in
    the database: a new database volume registers again."""
    from .settings import database_service
    return f"{service}_keystone_register", {"image": REGISTRATION_IMAGE, "fills": [prefix + database_service()]}


def registration_job(service, block, settings, passwords, host, where):
    """({job name: job}, problems): the job that registers `service` with keystone, in
    the form of a folder's `jobs:` (the renderer treats it as one), derived from the
    `register:` block of its folder (docs/design.md: keystone registration):

        register:
          service: {name: glance, type: image, description: OpenStack Image}
          endpoints: {public: URL, internal: URL, admin: URL}     # one or more
          user: {name: glance, password: glance_keystone_password,  # a passwords.yml key
                 project: service, roles: [admin]}                  # these two are the defaults

    A folder whose APIs are several keystone services (one user for all) lists them
    instead of `service` and `endpoints`:

        register:
          services:
            - {name: heat, type: orchestration, description: ..., endpoints: {...}}
            - {name: heat-cfn, type: cloudformation, description: ..., endpoints: {...}}
          user: {...}

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

    def mapping(value, path, known):
        if not isinstance(value, dict):
            problems.append(f"{where}.{path}: required, a mapping")
            return {}
        for unknown in sorted(set(value) - set(known)):
            problems.append(f"{where}.{path}.{unknown}: unknown key (known: {', '.join(known)})")
        return value

    def keystone_service(declared, endpoints, path, endpoints_path):
        """{name, type, description, endpoints} of one declared service."""
        declared = mapping(declared, path, ("name", "type", "description"))
        endpoints = mapping(endpoints, endpoints_path, REGISTER_INTERFACES)
        name, kind = text(declared, "name", f"{path}.name"), text(declared, "type", f"{path}.type")
        description = declared.get("description", "")
        if not isinstance(description, str):
            problems.append(f"{where}.{path}.description: expected a string, got {description!r}")
        if not endpoints:
            problems.append(f"{where}.{endpoints_path}: at least one of {', '.join(REGISTER_INTERFACES)}")
        for interface, url in endpoints.items():
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                problems.append(f"{where}.{endpoints_path}.{interface}: expected an http(s) URL, got {url!r}")
        return {"name": name, "type": kind, "description": description, "endpoints": dict(sorted(endpoints.items()))}

    if not isinstance(block, dict):
        return {}, [f"{where}: expected a mapping with service, endpoints and user (or services and user)"]
    known = ("services", "user") if "services" in block else ("endpoints", "service", "user")
    for unknown in sorted(set(block) - set(known)):
        problems.append(f"{where}.{unknown}: unknown key (known: {', '.join(known)})")
    if "services" not in block:
        services = [keystone_service(block.get("service"), block.get("endpoints"), "service", "endpoints")]
    elif isinstance(block["services"], list) and block["services"]:
        services = [keystone_service({k: v for k, v in entry.items() if k != "endpoints"}, entry.get("endpoints"),
                                     f"services[{index}]", f"services[{index}].endpoints")
                    if isinstance(entry, dict) else mapping(entry, f"services[{index}]", ())
                    for index, entry in enumerate(block["services"])]
    else:
        problems.append(f"{where}.services: expected a non-empty list of {{name, type, description, endpoints}}")
    user = mapping(block.get("user"), "user", ("name", "password", "project", "roles"))
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
    registration = {"services": services, "user": {"name": user_name, "project": project, "roles": roles}}
    environment = {
        "OS_AUTH_URL": keystone_url({**settings, **host}),
        "OS_USERNAME": settings["keystone_admin_user"],
        "OS_PASSWORD": passwords["keystone_admin_password"],
        "OS_PROJECT_NAME": settings["keystone_admin_project"],
        "OS_REGION_NAME": settings["openstack_region_name"],
        "KOLLA_REGISTRATION": json.dumps(registration, sort_keys=True),
        "KOLLA_SERVICE_PASSWORD": passwords[password_key],
    }
    name, outline = registration_outline(service, settings["container_name_prefix"])
    return {name: {
        **outline, "command": ["kolla_keystone_register"], "environment": environment,
        # the catalog follows the declaration back too (public endpoints without TLS again)
        "converges": True,
        "host_namespaces": ["net"], "reasons": {"net": REGISTER_REASON}}}, []
