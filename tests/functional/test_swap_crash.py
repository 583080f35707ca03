"""A swap killed with SIGKILL at any step is completed or undone by the next
command, and history never claims two running generations."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import KOLLA
from kolla_salt.containers.swap import STEPS

pytestmark = pytest.mark.functional
ONLY_MEMCACHED = {"enable_mariadb": False, "enable_rabbitmq": False, "enable_keystone": False}


def kill_rollback_at(env, name, step, timeout=60):
    """Starts `kolla-salt rollback NAME`, kills it and the salt-call doing its work
    (its process group) with SIGKILL as soon as its swap journal reaches `step` (or a
    later one); returns the journal as the kill left it (None if the rollback
    finished first)."""
    journal = env.root / "state" / "containers" / name / "swap.json"
    proc = subprocess.Popen([KOLLA, "--config-dir", str(env.config_dir), "rollback", name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                seen = json.loads(journal.read_text())["step"]
            except (FileNotFoundError, ValueError):
                seen = None
            if seen is not None and STEPS.index(seen) >= STEPS.index(step):
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait()
    return json.loads(journal.read_text()) if journal.exists() else None


def assert_one_generation_serves(env, docker_client, name, generation):
    containers = {c.name: c for c in docker_client.containers.list(all=True) if c.name.startswith(name)}
    assert f"{name}.next" not in containers
    running = [c for c in containers.values() if c.status == "running"]
    assert [c.name for c in running] == [name]
    assert running[0].labels["kolla.generation"] == str(generation)
    history = json.loads(env.run("history", name, "--format", "json").stdout)
    assert [h["generation"] for h in history if h["outcome"] == "running"] == [generation]


@pytest.mark.parametrize("step", STEPS)
def test_a_killed_rollback_is_completed_or_undone_by_the_next_command(kolla_env, built_images, docker_client,
                                                                      step):
    built_images("memcached")
    env = kolla_env
    env.write_globals(**ONLY_MEMCACHED, container_environment={"KST_ROUND": "1"})
    env.run("deploy")
    env.write_globals(container_environment={"KST_ROUND": "2"})
    env.run("deploy")                                  # generation 2 replaced 1
    name = env.name("memcached")
    for _ in range(5):                                 # a fast swap may pass a step between two looks
        interrupted = kill_rollback_at(env, name, step)
        if interrupted is not None:
            break
        env.run("rollback", name)                      # it finished: undo it and try again
    else:
        raise AssertionError(f"no swap journal reached step {step} in five rollbacks")
    assert STEPS.index(interrupted["step"]) >= STEPS.index(step)
    # status is the next command: it finishes the swap and shows what runs.
    env.run("status")
    done = interrupted["step"] == "healthy"
    expected = interrupted["generation"] if done else interrupted["old_generation"]
    assert_one_generation_serves(env, docker_client, name, expected)
    # The rollback was declared before it started: the next deploy completes it
    # (if it was undone) and a second deploy is a no-op.
    env.run("deploy")
    current = docker_client.containers.get(name)
    assert "KST_ROUND=1" in current.attrs["Config"]["Env"]
    assert "0 changed, 0 failed" in env.run("deploy").stdout
    assert_one_generation_serves(env, docker_client, name, int(current.labels["kolla.generation"]))
