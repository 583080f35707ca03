"""Client files for the admin of a deployed cloud: clouds.yaml (cloud
`kolla-admin`) and admin-openrc.sh, both 0600 beside globals.yml."""
from pathlib import Path

import yaml

from . import certificates
from ..private import write_private

CLOUD_NAME = "kolla-admin"


def clouds_file_problem(config_dir):
    """Why the admin's clouds.yaml of `config_dir` cannot be used (it is missing), or None."""
    clouds = Path(config_dir) / "clouds.yaml"
    return None if clouds.is_file() else f"{clouds}: missing; `kolla-salt deploy` writes it once keystone serves"


def keystone_url(settings):
    """Where clients reach keystone: haproxy's VIP (over TLS with
    kolla_enable_tls_internal), or the host's address without haproxy (the host's
    facts in `settings`: kolla_salt.declaration.hostfacts.host_facts)."""
    return f"{settings['internal_protocol']}://{settings['kolla_internal_fqdn']}:{settings['keystone_public_port']}/v3"


def public_keystone_url(settings):
    """Keystone's public endpoint: over TLS on the external VIP with
    kolla_enable_tls_external, else keystone_url."""
    if not settings["kolla_enable_tls_external"]:
        return keystone_url(settings)
    return f"https://{settings['kolla_external_fqdn']}:{settings['keystone_public_port']}/v3"


def write_client_files(config_dir, settings, passwords):
    """The admin's clients use the public endpoints (over TLS with
    kolla_enable_tls_external or _internal, trusting the private CA when there is one).
    `settings`: a keystone host's, with its facts (kolla_salt.declaration.hostfacts)."""
    auth = {"auth_url": public_keystone_url(settings), "username": settings["keystone_admin_user"],
            "password": passwords["keystone_admin_password"], "project_name": settings["keystone_admin_project"],
            "user_domain_name": "Default", "project_domain_name": "Default"}
    cloud = {"auth": auth, "region_name": settings["openstack_region_name"], "interface": "public",
             "identity_api_version": 3}
    ca = certificates.certificates_dir(settings, config_dir) / certificates.CA_CERT
    trusted = bool(certificates.enabled(settings)) and ca.is_file()
    if trusted:
        cloud["cacert"] = str(ca)
    clouds_path = Path(config_dir) / "clouds.yaml"
    write_private(clouds_path, yaml.safe_dump({"clouds": {CLOUD_NAME: cloud}}, default_flow_style=False))
    openrc = "".join(f"export OS_{key.upper()}='{value}'\n" for key, value in auth.items())
    openrc += (f"export OS_REGION_NAME='{settings['openstack_region_name']}'\n"
               "export OS_IDENTITY_API_VERSION=3\nexport OS_INTERFACE=public\n"
               + (f"export OS_CACERT='{ca}'\n" if trusted else ""))
    openrc_path = Path(config_dir) / "admin-openrc.sh"
    write_private(openrc_path, openrc)
    return [clouds_path, openrc_path]
