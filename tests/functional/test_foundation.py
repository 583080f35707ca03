"""One service (memcached) deployed by Salt, masterless, on the real engine."""
import json
import socket
from pathlib import Path

import pytest

from kolla_salt.declaration.settings import default_image
from conftest import IMAGE_NAMESPACE, IMAGES

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
    memcached_env.write_globals(docker_namespace=IMAGE_NAMESPACE or None)

    # A problem only the whole pillar finds, said by Salt's compile as the CLI's own
    # checks say theirs (pillar/kolla.sls' kolla_problems), on the deploy and on the
    # one road of a host action.
    stray = memcached_env.config_dir / "config" / "nosuch"
    stray.mkdir(parents=True)
    for command, code in (("deploy", 2), ("status", 1)):
        proc = memcached_env.run(command, check=False)
        assert proc.returncode == code and f"{stray}: no service is called 'nosuch'" in proc.stderr, proc.stderr
    stray.rmdir()

    current = docker_client.containers.get(name)
    assert current.id == before and current.status == "running"


def test_state_refuses_a_spec_with_a_wrong_type(memcached_env, docker_client):
    """The Salt state itself (not only the CLI) names the bad key and acts on nothing."""
    memcached_env.run("deploy")
    from kolla_salt.roads.saltcall import salt_call
    spec = {"image": MEMCACHED_IMAGE, "stop_timeout": "soon"}
    code, data = salt_call(memcached_env.config_dir, memcached_env.globals["kolla_state_directory"],
                           ["state.single", "kolla_container.running", f"name={memcached_env.name('other')}",
                            f"spec={json.dumps(spec)}"])
    ret = next(iter(data.values()))
    assert code != 0 and ret["result"] is False and ret["changes"] == {}
    assert "stop_timeout: expected int, got str 'soon'" in ret["comment"]
    assert memcached_env.name("other") not in [c.name for c in docker_client.containers.list(all=True)]


def test_job_state_fails_with_the_job_output(memcached_env):
    from kolla_salt.roads.saltcall import salt_call
    spec = {"image": MEMCACHED_IMAGE, "restart_policy": "no",
            "command": ["sh", "-c", "echo migrating; echo broken schema >&2; exit 3"]}
    code, data = salt_call(memcached_env.config_dir, memcached_env.globals["kolla_state_directory"],
                           ["state.single", "kolla_container.job", f"name={memcached_env.name('job')}",
                            f"spec={json.dumps(spec)}"])
    ret = next(iter(data.values()))
    assert ret["result"] is False
    assert "exited with code 3" in ret["comment"] and "broken schema" in ret["comment"]


def test_a_job_gets_a_quarter_of_a_services_cpu_weight(memcached_env, tmp_path):
    """One-shot jobs (migrations, bootstraps) yield the CPU to the services users
    reach on a busy host: a job's cgroup gets cpu.shares 256, a quarter of the 1024
    a service keeps (cgroup v2 converts it to cpu.weight 10 of 100)."""
    from kolla_salt.roads.saltcall import salt_call
    tmp_path.chmod(0o777)   # the job runs as the image's user
    read_weight = "cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/cpu.weight"
    spec = {"image": MEMCACHED_IMAGE, "restart_policy": "no", "volumes": [f"{tmp_path}:/out"],
            "command": ["sh", "-c", f"({read_weight}) > /out/weight"]}
    code, data = salt_call(memcached_env.config_dir, memcached_env.globals["kolla_state_directory"],
                           ["state.single", "kolla_container.job", f"name={memcached_env.name('weighed')}",
                            f"spec={json.dumps(spec)}"])
    assert code == 0, data
    assert int((tmp_path / "weight").read_text()) in (256, 10)


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
                                                  tag=f"{IMAGES}/memcached:{tag}", rm=True, forcerm=True)
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


# -- failure paths: what an operator relies on when something goes wrong ----------------
def build_memcached_child(docker_client, tag, *lines):
    """kolla-salt/memcached:<tag>, built FROM the real image plus `lines`; its id."""
    import io
    dockerfile = "\n".join([f"FROM {docker_client.images.get(MEMCACHED_IMAGE).id}", *lines]) + "\n"
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()),
                                          tag=f"{IMAGES}/memcached:{tag}", rm=True, forcerm=True)
    return image.id


def remove_images(docker_client, env, image_ids):
    import docker.errors
    env.cleanup(docker_client)     # first the containers that use them
    for image_id in image_ids:
        try:
            docker_client.images.remove(image_id, force=True)
        except docker.errors.ImageNotFound:
            pass


def state_single(env, function, name, spec, test=False):
    """One kolla_container state through salt-call, with no redaction by the caller:
    what Salt itself returns. (exit code, the state's return)."""
    from kolla_salt.roads.saltcall import salt_call
    code, data = salt_call(env.config_dir, env.globals["kolla_state_directory"],
                           ["state.single", function, f"name={name}", f"spec={json.dumps(spec)}"]
                           + (["test=True"] if test else []))
    return code, next(iter(data.values()))


def test_a_failed_stop_first_swap_restores_the_old_container(memcached_env, docker_client):
    """memcached swaps stop-first: the old container stops before the new one starts.
    The new one never passes its check (whose output holds a password): the deploy
    fails, and the old container runs again under its name, the same container with
    its restart policy; the check's output is shown with the password hidden."""
    env = memcached_env
    env.run("deploy")
    name = env.name("memcached")
    old = docker_client.containers.get(name)
    secret = env.passwords()["database_password"]
    tag = f"{env.prefix}broken"
    image = build_memcached_child(
        docker_client, tag, f"RUN printf '#!/bin/sh\\necho cannot log in with {secret}\\nexit 1\\n' "
                            "> /usr/local/bin/kolla_check")
    try:
        env.write_globals(memcached_tag=tag, container_health_timeout=8)
        proc = env.run("deploy", check=False)
        assert proc.returncode == 1
        assert f"{name}: generation 2 failed" in proc.stdout and "restored generation 1" in proc.stdout, proc.stdout
        assert "cannot log in with ********" in proc.stdout and secret not in proc.stdout + proc.stderr
        back = docker_client.containers.get(name)
        assert back.id == old.id and back.status == "running" and back.labels["kolla.generation"] == "1"
        assert back.attrs["HostConfig"]["RestartPolicy"] == old.attrs["HostConfig"]["RestartPolicy"]
        assert back.attrs["State"]["StartedAt"] != old.attrs["State"]["StartedAt"]   # it was stopped: stop-first
        assert "STAT pid" in memcached_stats(env.globals["memcached_port"])
    finally:
        remove_images(docker_client, env, [image])


def test_rollback_returns_to_the_last_good_generation_not_the_first(memcached_env, docker_client):
    env = memcached_env
    name = env.name("memcached")
    for megabytes in (64, 65, 66):                 # generations 1, 2 (both replaced healthy) and 3
        env.write_globals(memcached_memory_mb=megabytes)
        env.run("deploy")
    assert docker_client.containers.get(name).labels["kolla.generation"] == "3"
    out = env.run("rollback", name).stdout
    assert "generation 4 runs what generation 2 ran" in out
    config = json.loads((Path(env.globals["node_config_directory"]) / name / "config.json").read_text())
    running = docker_client.containers.get(name)
    assert running.labels["kolla.generation"] == "4"
    assert "-m 65" in running.exec_run(["cat", "/var/lib/kolla/config_files/config.json"]).output.decode()
    assert "-m 66" in config["command"]            # the declaration stays; the pin holds generation 2


def test_a_container_or_job_that_fails_shows_no_password(memcached_env, docker_client):
    """The Salt state's own comment (no redaction by the CLI) hides the passwords of
    the host's pillar (those its services use: mariadb's, enabled here), when a
    container exits at start and when a job fails."""
    env = memcached_env
    env.write_globals(enable_mariadb=True)
    secret = env.passwords()["database_password"]
    leak = ["sh", "-c", f"echo connecting as admin with {secret}; sleep 1; exit 3"]
    code, ret = state_single(env, "kolla_container.running", env.name("leaky"),
                             {"image": MEMCACHED_IMAGE, "command": leak, "restart_policy": "no",
                              "healthcheck": {"test": ["kolla_check", "tcp", "127.0.0.1:1"]}})
    assert ret["result"] is False and "connecting as admin with ********" in ret["comment"], ret["comment"]
    assert secret not in json.dumps(ret)
    code, ret = state_single(env, "kolla_container.job", env.name("leaky_job"),
                             {"image": MEMCACHED_IMAGE, "command": leak, "restart_policy": "no"})
    assert ret["result"] is False and "connecting as admin with ********" in ret["comment"]
    assert secret not in json.dumps(ret)


def test_a_job_runs_again_when_its_image_content_changes_and_never_under_test(memcached_env, docker_client,
                                                                              tmp_path):
    """Same tag, new content (a rebuild): the job runs at the next deploy; nothing
    changed: it does not. With test=True it says it would run, and runs nothing."""
    env = memcached_env
    tag = f"{env.prefix}jobs"
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = {"image": f"{IMAGES}/memcached:{tag}", "restart_policy": "no", "volumes": [f"{marks}:/marks"],
            "command": ["sh", "-c", "cat /build >> /marks/runs"]}
    job = env.name("content_job")
    images = [build_memcached_child(docker_client, tag, "RUN echo first > /build")]
    try:
        code, ret = state_single(env, "kolla_container.job", job, spec, test=True)
        assert ret["result"] is None and "would run" in ret["comment"]
        assert not (marks / "runs").exists()                                    # nothing ran
        assert job not in [c.name for c in docker_client.containers.list(all=True)]
        state_single(env, "kolla_container.job", job, spec)
        code, ret = state_single(env, "kolla_container.job", job, spec)
        assert ret["changes"] == {}                                             # nothing changed: not again
        images.append(build_memcached_child(docker_client, tag, "RUN echo second > /build"))
        code, ret = state_single(env, "kolla_container.job", job, spec, test=True)
        assert ret["result"] is None and "would run" in ret["comment"]
        state_single(env, "kolla_container.job", job, spec)
        assert (marks / "runs").read_text().split() == ["first", "second"]
    finally:
        remove_images(docker_client, env, images)
