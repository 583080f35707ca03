"""A service is its folder: a new one dropped into the checkout (its service folder and
its image folder, no other file touched) is built, deployed, checked, upgraded and
removed by the same commands as every other."""
import shutil

import pytest
import yaml

from kolla_salt import paths
from kolla_salt.declaration.settings import default_settings
from kolla_salt.declaration.tree import load_tree
from probes import memcached_answers

pytestmark = pytest.mark.functional
SERVICE = "kstmemo"   # memcached under another name, user and port
PORT = 31311          # none of the suite's (tests/conftest.py TEST_PORTS) nor a default


def folders(prefix):
    """The two folders of the new service, as files: {path under the checkout: text}."""
    settings = {
        "set": "cache-control",
        "after": ["memcached"],
        "settings": {f"enable_{SERVICE}": False, f"{SERVICE}_tag": "", f"{SERVICE}_port": 11311},
    }
    definition = f"""role: control
containers:
  {SERVICE}:
    image: {SERVICE}
    command: /usr/bin/memcached -u {SERVICE} -l 127.0.0.1 -p {{{{ {SERVICE}_port }}}} -m 16 -U 0
    run_as: {SERVICE}
    config_files: []
    environment: {{{{ container_environment | to_json }}}}
    host_namespaces: [net]
    reasons:
      net: "serves clients on the host's loopback address without docker-proxy"
    volumes: []
    healthcheck:
      test: [kolla_check, memcached, "127.0.0.1:{{{{ {SERVICE}_port }}}}"]
      retries: 3
      timeout: 5
"""
    # Its image: memcached's with a user of its own (image.yml `user`) and a marker the
    # upgrade changes.
    dockerfile = f"""FROM {{{{ parent_image }}}}
{{% from "macros.j2" import service_user %}}
{{{{ service_user(image_user) }}}}
LABEL kolla.test={prefix.rstrip("-")}
COPY marker /etc/{SERVICE}-marker
"""
    return {
        f"salt/states/kolla/{SERVICE}/settings.yml": yaml.safe_dump(settings),
        f"salt/states/kolla/{SERVICE}/service.yaml": definition,
        f"salt/states/kolla/{SERVICE}/init.sls": (f'{{% from "kolla/service.jinja" import deploy_service %}}\n'
                                                  f'{{{{ deploy_service("{SERVICE}") }}}}\n'),
        f"images/{SERVICE}/image.yml": f"parent: memcached\nuser: {{name: {SERVICE}, uid: 42999, home: /var/lib/{SERVICE}}}\n",
        f"images/{SERVICE}/Dockerfile.j2": dockerfile,
        f"images/{SERVICE}/marker": "first\n",
    }


@pytest.fixture
def new_service(kolla_env, built_images):
    """The new service's folders in the checkout, removed afterwards (with its image)."""
    built_images("memcached")
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


def test_a_new_service_folder_is_built_deployed_checked_upgraded_and_removed(new_service, docker_client):
    env = new_service
    assert ("cache-control", ["memcached", SERVICE]) in load_tree()
    assert default_settings()[f"enable_{SERVICE}"] is False
    listed = env.run("settings").stdout
    assert f"{SERVICE}_port: 11311\tsalt/states/kolla/{SERVICE}/settings.yml" in listed, listed

    env.run("build", SERVICE)
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False, enable_memcached=False,
                      **{f"enable_{SERVICE}": True, f"{SERVICE}_port": PORT})
    out = env.run("deploy").stdout
    name = env.name(SERVICE)
    assert f"{name} created, generation 1 is healthy" in out, out
    container = docker_client.containers.get(name)
    assert container.labels["kolla.set"] == f"cache-control/{SERVICE}"
    assert memcached_answers(PORT, timeout=5)
    users = {row[2]: row[1] for row in container.top(ps_args="-o pid,uid,comm")["Processes"]}
    assert users["memcached"] == "42999"           # its own user, from its image folder
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout

    # A new build of its image (the marker changed) is what the upgrade runs.
    (paths.IMAGES_DIR / SERVICE / "marker").write_text("second\n")
    env.run("build", SERVICE)
    out = env.run("upgrade", "--services", SERVICE).stdout
    assert f"{name} recreated, generation 2 is healthy" in out, out
    upgraded = docker_client.containers.get(name)
    assert upgraded.exec_run(["cat", f"/etc/{SERVICE}-marker"]).output == b"second\n"
    assert memcached_answers(PORT, timeout=5)
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout

    # Disabled, its containers go (their kept generation too) and the next deploy has nothing to do.
    env.write_globals(**{f"enable_{SERVICE}": False})
    env.run("deploy")
    assert not [c.name for c in docker_client.containers.list(all=True) if c.name.startswith(name)]
    assert " 0 changed, 0 failed" in env.run("deploy", "--test").stdout
