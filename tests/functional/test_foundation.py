"""Issue 2: one service (memcached) deployed by Salt, masterless, on the real engine."""
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kolla_salt.inventory import default_image

pytestmark = pytest.mark.functional

MEMCACHED_IMAGE = default_image("memcached")
ONLY_MEMCACHED = {"enable_mariadb": False, "enable_rabbitmq": False, "enable_keystone": False}


@pytest.fixture
def memcached_env(kolla_env, built_images):
    built_images("memcached")
    kolla_env.write_globals(**ONLY_MEMCACHED)
    return kolla_env


def memcached_stats(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"stats\r\n")
        return conn.recv(65536).decode()


def test_deploy_runs_a_healthy_labelled_memcached(memcached_env, docker_client):
    out = memcached_env.run("deploy").stdout
    assert "created, generation 1 is healthy" in out
    container = docker_client.containers.get(memcached_env.name("memcached"))
    labels = container.labels
    assert labels["kolla.set"] == "cache-control/memcached"
    assert labels["kolla.generation"] == "1"
    assert len(labels["kolla.config-hash"]) == 16
    assert "STAT pid" in memcached_stats(memcached_env.globals["memcached_port"])
    # PID 1 is tini; memcached runs as its own user, not root.
    processes = container.top(ps_args="-o pid,uid,comm")["Processes"]
    uids = {row[2]: row[1] for row in processes}
    memcache_uid = container.exec_run(["id", "-u", "memcache"]).output.decode().strip()
    assert uids["tini"] == "0"
    assert uids["memcached"] == memcache_uid != "0"
    config = json.loads((Path(memcached_env.globals["node_config_directory"])
                         / memcached_env.name("memcached") / "config.json").read_text())
    assert config["user"] == "memcache"


def test_second_deploy_changes_nothing(memcached_env, docker_client):
    memcached_env.run("deploy")
    before = docker_client.containers.get(memcached_env.name("memcached")).attrs
    out = memcached_env.run("deploy").stdout
    assert "0 changed, 0 failed" in out
    after = docker_client.containers.get(memcached_env.name("memcached")).attrs
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]


def test_environment_change_recreates_with_next_generation(memcached_env, docker_client):
    memcached_env.write_globals(container_environment={"TZ": "UTC"})
    memcached_env.run("deploy")
    name = memcached_env.name("memcached")
    first = docker_client.containers.get(name)
    memcached_env.write_globals(container_environment={"TZ": "Europe/Paris"})
    out = memcached_env.run("deploy").stdout
    assert "environment: changed: TZ (new value)" in out
    assert "Europe/Paris" not in out  # values are not echoed: they may be secrets
    second = docker_client.containers.get(name)
    assert second.id != first.id
    assert second.labels["kolla.generation"] == "2"
    assert "TZ=Europe/Paris" in second.attrs["Config"]["Env"]
    # The replaced generation is kept aside (stopped, no restart) for rollback.
    kept = docker_client.containers.get(f"{name}.gen1")
    assert kept.status == "exited"
    assert kept.attrs["HostConfig"]["RestartPolicy"]["Name"] == "no"
    # Generations keep growing and are never reused, also after rollback.
    memcached_env.run("rollback", name)
    assert docker_client.containers.get(name).labels["kolla.generation"] == "3"
    assert "TZ=UTC" in docker_client.containers.get(name).attrs["Config"]["Env"]


def test_test_mode_predicts_and_changes_nothing(memcached_env, docker_client):
    memcached_env.run("deploy")
    name = memcached_env.name("memcached")
    before = docker_client.containers.get(name)
    memcached_env.write_globals(container_environment={"TZ": "UTC"})
    out = memcached_env.run("deploy", "--test").stdout
    assert "WOULD" in out and "would be recreated as generation 2" in out
    after = docker_client.containers.get(name)
    assert after.id == before.id and after.labels["kolla.generation"] == "1"


def test_bad_input_is_refused_before_anything_changes(memcached_env, docker_client):
    memcached_env.run("deploy")
    name = memcached_env.name("memcached")
    before = docker_client.containers.get(name).id

    proc = memcached_env.run("deploy", "--services", "memcached,nosuch", check=False)
    assert proc.returncode == 2 and "unknown or disabled service 'nosuch'" in proc.stderr

    memcached_env.write_globals(memcached_port="eleven")
    proc = memcached_env.run("deploy", check=False)
    assert proc.returncode == 2
    assert "globals.yml: key 'memcached_port' must be a whole number, got 'eleven'" in proc.stderr
    memcached_env.write_globals(memcached_port=31211)

    memcached_env.write_globals(docker_namespace="kolla-salt-nosuch")
    proc = memcached_env.run("deploy", check=False)
    assert proc.returncode == 2
    assert f"image kolla-salt-nosuch/{MEMCACHED_IMAGE.split('/')[1]} is not on this host" in proc.stderr

    current = docker_client.containers.get(name)
    assert current.id == before and current.status == "running"


def test_state_refuses_a_spec_with_a_wrong_type(memcached_env, docker_client):
    """The Salt state itself (not only the CLI) names the bad key and acts on nothing."""
    memcached_env.run("deploy")
    from kolla_salt.saltcall import salt_call
    spec = {"image": MEMCACHED_IMAGE, "stop_timeout": "soon"}
    code, data = salt_call(memcached_env.config_dir, memcached_env.globals["kolla_state_directory"],
                           ["state.single", "kolla_container.running", f"name={memcached_env.name('other')}",
                            f"spec={json.dumps(spec)}"])
    ret = next(iter(data.values()))
    assert code != 0 and ret["result"] is False and ret["changes"] == {}
    assert "stop_timeout: expected int, got str 'soon'" in ret["comment"]
    assert memcached_env.name("other") not in [c.name for c in docker_client.containers.list(all=True)]


def test_job_state_fails_with_the_job_output(memcached_env):
    from kolla_salt.saltcall import salt_call
    spec = {"image": MEMCACHED_IMAGE, "restart_policy": "no",
            "command": ["sh", "-c", "echo migrating; echo broken schema >&2; exit 3"]}
    code, data = salt_call(memcached_env.config_dir, memcached_env.globals["kolla_state_directory"],
                           ["state.single", "kolla_container.job", f"name={memcached_env.name('job')}",
                            f"spec={json.dumps(spec)}"])
    ret = next(iter(data.values()))
    assert ret["result"] is False
    assert "exited with code 3" in ret["comment"] and "broken schema" in ret["comment"]


def test_pruning_keeps_generations_kept_and_drops_orphaned_images(memcached_env, docker_client):
    """generations_kept: 1. Each deploy rebuilds the memcached tag: the replaced
    generation beyond the one kept goes, and its image, now untagged, goes too."""
    import io

    import docker.errors
    base = docker_client.images.get(MEMCACHED_IMAGE)
    tag = f"{memcached_env.prefix}prune"
    memcached_env.write_globals(generations_kept=1, memcached_tag=tag)
    name = memcached_env.name("memcached")
    images = []
    try:
        for round_ in range(3):
            dockerfile = f"FROM {base.id}\nLABEL kst.round={round_}\n"
            image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()),
                                                  tag=f"kolla-salt/memcached:{tag}", rm=True, forcerm=True)
            images.append(image.id)
            memcached_env.run("deploy")
        assert docker_client.containers.get(name).labels["kolla.generation"] == "3"
        assert docker_client.containers.get(f"{name}.gen2").image.id == images[1]   # kept
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(f"{name}.gen1")                             # pruned
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(images[0])                                      # and its image
        assert docker_client.images.get(images[1]).id == images[1]                   # still used
    finally:
        memcached_env.cleanup(docker_client)
        for image_id in images:
            try:
                docker_client.images.remove(image_id, force=True)
            except docker.errors.ImageNotFound:
                pass
