"""A service is its folder: a new API service dropped into the checkout (its service
folder and its image folder, no other file touched), with a database, a config
template, a keystone registration and a haproxy entry, is built, deployed, checked,
upgraded, rolled back and removed by the same commands as every other."""
import json
import shutil
import urllib.request

import pytest
import yaml

from kolla_salt import paths
from kolla_salt.declaration.settings import default_settings
from kolla_salt.declaration.tree import load_tree

pytestmark = pytest.mark.functional
SERVICE = "kstplace"   # placement under another name, database, keystone user and ports
PORT, STANDBY = 31778, 31779   # none of the suite's (tests/conftest.py TEST_PORTS) nor a default
VIP = default_settings()["kolla_internal_vip_address"]


def folders(prefix):
    """The two folders of the new service, as files: {path under the checkout: text}."""
    settings = {
        "set": "openstack-control",
        "settings": {f"enable_{SERVICE}": False, f"{SERVICE}_tag": "", f"{SERVICE}_api_port": 8978,
                     f"{SERVICE}_api_standby_port": 8979},
        "passwords": [f"{SERVICE}_database_password", f"{SERVICE}_keystone_password"],
        "rules": {f"{SERVICE}_api_port": {"min": 1024, "why": "it binds as its own user"}},
    }
    # Placement's definition, every name its own: its haproxy entry, its registration,
    # its database job and schema job, its blue/green API container.
    definition = f"""{{%- from "openstack.jinja" import endpoints, database_job, api_net_reason as net_reason, uwsgi_processes with context %}}
role: control
loadbalancer:
  {SERVICE}:
    port: {{{{ {SERVICE}_api_port }}}}
    listen_ports: [{{{{ {SERVICE}_api_port }}}}, {{{{ {SERVICE}_api_standby_port }}}}]
    check: /
    maxconn: {{{{ openstack_service_workers }}}}
register:
  service: {{name: {SERVICE}, type: {SERVICE}-test, description: "A throwaway API of the suite"}}
  endpoints: {{{{ endpoints({SERVICE}_api_port) }}}}
  user: {{name: {SERVICE}, password: {SERVICE}_keystone_password}}
containers:
  {SERVICE}_api:
    image: {SERVICE}
    command: kolla_uwsgi_serve placement {{{{ api_interface_address }}}} {{{{ {SERVICE}_api_port }}}} {{{{ uwsgi_processes }}}}
    run_as: placement
    config_files:
      - {{template: {SERVICE}.conf.j2, dest: /etc/placement/placement.conf, owner: "placement:placement", perm: "0600"}}
    environment: {{{{ container_environment | to_json }}}}
    host_namespaces: [net]
    reasons: {{net: "{{{{ net_reason }}}}"}}
    volumes: []
    backend: {SERVICE}
    swap: overlap
    healthcheck:
      test: [kolla_check, api, placement, /etc/placement/placement.conf, /resource_providers]
      timeout: 10
jobs:
  {SERVICE}_database: {{{{ database_job("{SERVICE}", {SERVICE}_database_password) }}}}
  {SERVICE}_db_sync:
    image: {SERVICE}
    fills: ["{{{{ container_name_prefix }}}}mariadb"]
    config_from: {SERVICE}_api
    command: [kolla_start, placement-manage, db, sync]
    host_namespaces: [net]
    reasons: {{net: "{{{{ net_reason }}}}"}}
    volumes: []
"""
    config = f"""{{%- from "openstack.jinja" import keystone_authtoken with context -%}}
[DEFAULT]
use_stderr = true

[placement_database]
connection = mysql+pymysql://{SERVICE}:{{{{ {SERVICE}_database_password }}}}@{{{{ database_address }}}}:{{{{ database_port }}}}/{SERVICE}
max_retries = -1

[api]
auth_strategy = keystone
{{{{ keystone_authtoken("{SERVICE}", {SERVICE}_keystone_password) }}}}
"""
    # Its image: placement's, with a marker the upgrade changes.
    dockerfile = f"""FROM {{{{ parent_image }}}}
LABEL kolla.test={prefix.rstrip("-")}
COPY marker /etc/{SERVICE}-marker
"""
    return {
        f"salt/states/kolla/{SERVICE}/settings.yml": yaml.safe_dump(settings),
        f"salt/states/kolla/{SERVICE}/service.yaml": definition,
        f"salt/states/kolla/{SERVICE}/templates/{SERVICE}.conf.j2": config,
        f"salt/states/kolla/{SERVICE}/init.sls": (f'{{% from "kolla/service.jinja" import deploy_service %}}\n'
                                                  f'{{{{ deploy_service("{SERVICE}") }}}}\n'),
        f"images/{SERVICE}/image.yml": "parent: placement\n",
        f"images/{SERVICE}/Dockerfile.j2": dockerfile,
        f"images/{SERVICE}/marker": "first\n",
    }


@pytest.fixture
def new_service(kolla_env, built_images):
    """The new service's folders in the checkout, removed afterwards (with its image)."""
    built_images("mariadb", "memcached", "toolbox", "keystone", "haproxy", "placement")
    made = [paths.SERVICES_DIR / SERVICE, paths.IMAGES_DIR / SERVICE]
    assert not any(folder.exists() for folder in made), made
    try:
        for path, text in folders(kolla_env.prefix).items():
            (paths.REPO / path).parent.mkdir(parents=True, exist_ok=True)
            (paths.REPO / path).write_text(text)
        yield kolla_env
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def resource_providers(env):
    """GET /resource_providers of the new API through haproxy on the VIP, with a token."""
    token = env.openstack("token", "issue", "-c", "id").strip()
    request = urllib.request.Request(f"http://{VIP}:{PORT}/resource_providers", headers={"X-Auth-Token": token})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def marker(docker_client, env):
    container = docker_client.containers.get(env.name(f"{SERVICE}_api"))
    return container.exec_run(["cat", f"/etc/{SERVICE}-marker"]).output.decode().strip()


def test_a_new_api_service_folder_is_built_deployed_registered_upgraded_rolled_back_and_removed(new_service,
                                                                                                   docker_client):
    env = new_service
    assert ("openstack-control", SERVICE) in [(top, s) for top, services in load_tree() for s in services]
    listed = env.run("settings").stdout
    assert f"{SERVICE}_api_port: 8978\tsalt/states/kolla/{SERVICE}/settings.yml" in listed, listed
    env.run("genpwd")   # its two passwords
    assert {f"{SERVICE}_database_password", f"{SERVICE}_keystone_password"} <= set(env.passwords())
    env.write_globals(**{f"{SERVICE}_api_port": 80})   # its folder's own value rule
    proc = env.run("validate", check=False)
    assert (f"key '{SERVICE}_api_port' must be at least 1024, got 80: it binds as its own user"
            in proc.stderr), proc.stdout + proc.stderr

    env.write_globals(enable_rabbitmq=False, enable_haproxy=True, **{f"enable_{SERVICE}": True,
                                                                      f"{SERVICE}_api_port": PORT,
                                                                      f"{SERVICE}_api_standby_port": STANDBY})
    env.run("build", SERVICE)
    out = env.run("deploy").stdout
    name = env.name(f"{SERVICE}_api")
    assert f"{name} created, generation 1 is healthy" in out, out
    assert docker_client.containers.get(name).labels["kolla.set"] == f"openstack-control/{SERVICE}"
    # Registered in keystone's catalog on the VIP, served through haproxy, from its own database.
    urls = env.openstack("endpoint", "list", "--service", SERVICE, "-c", "URL").split()
    assert urls and all(url == f"http://{VIP}:{PORT}" for url in urls), urls
    assert resource_providers(env) == {"resource_providers": []}
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout

    # A new build of its image (the marker changed) is what the upgrade runs, blue/green.
    (paths.IMAGES_DIR / SERVICE / "marker").write_text("second\n")
    env.run("build", SERVICE)
    env.run("upgrade", "--services", SERVICE)
    assert docker_client.containers.get(name).labels["kolla.generation"] == "2"
    assert marker(docker_client, env) == "second"
    assert resource_providers(env) == {"resource_providers": []}
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout

    # Rolled back to generation 1 (held by pins.yml), and a deploy keeps it there.
    env.run("rollback", f"{SERVICE}_api")
    assert marker(docker_client, env) == "first"
    assert resource_providers(env) == {"resource_providers": []}
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout
    env.run("unpin", f"{SERVICE}_api")

    # Disabled, its containers go (their kept generations too), haproxy no longer fronts
    # it, and the next deploy has nothing to do; its database stays (data is never
    # removed implicitly).
    env.write_globals(**{f"enable_{SERVICE}": False})
    env.run("deploy")
    assert not [c.name for c in docker_client.containers.list(all=True) if c.name.startswith(name)]
    haproxy_cfg = (env.root / "etc" / env.name("haproxy") / "haproxy.cfg").read_text()
    assert SERVICE not in haproxy_cfg
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout
    databases = docker_client.containers.get(env.name("mariadb")).exec_run(
        ["sh", "-c", "mariadb --defaults-extra-file=/etc/mysql/kolla-client.cnf -N -e 'SHOW DATABASES'"]).output
    assert SERVICE in databases.decode().split(), databases
