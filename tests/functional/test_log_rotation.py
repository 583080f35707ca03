"""Log rotation: the cron container keeps /var/log/kolla/<service>/ from filling the disk."""
import time

import pytest

from test_foundation import ONLY_MEMCACHED, memcached_stats

pytestmark = pytest.mark.functional


@pytest.fixture
def rotating_env(kolla_env, built_images):
    built_images("memcached", "cron")
    kolla_env.write_globals(**ONLY_MEMCACHED, enable_cron=True, cron_logrotate_log_maxsize="1k",
                            cron_logrotate_run_interval=2)
    return kolla_env


def test_a_log_past_its_maxsize_is_rotated_and_the_service_keeps_logging(rotating_env, docker_client):
    env = rotating_env
    env.run("deploy")
    folder = env.root / "log" / "memcached"
    log, rotated = folder / "memcached.log", folder / "memcached.log.1"
    # memcached -vv prints its slab classes at start (a few kB): past 1k at once.
    deadline = time.monotonic() + 30
    while not rotated.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rotated.exists(), f"not rotated: {sorted(p.name for p in folder.iterdir())}"
    assert "slab class" in rotated.read_text()

    # The service keeps writing to the same file (truncated in place, it appends):
    # new lines land at its start, with no hole of NUL bytes where the old text was.
    memcached_stats(env.globals["memcached_port"])
    deadline = time.monotonic() + 10
    while b"stats" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.5)
    content = log.read_bytes()
    assert b"stats" in content and b"\0" not in content

    cron = docker_client.containers.get(env.name("cron"))
    assert cron.labels["kolla.set"] == "common/cron"
    check = cron.exec_run(["kolla_logrotate", "check", "64"])
    assert check.exit_code == 0, check.output


def test_rotation_settings_are_validated_naming_the_key(rotating_env, docker_client):
    rotating_env.write_globals(cron_logrotate_rotation_interval="hourly-ish")
    proc = rotating_env.run("deploy", check=False)
    assert proc.returncode != 0
    assert "key 'cron_logrotate_rotation_interval' must be daily, weekly, monthly or yearly" in proc.stderr
    assert not [c for c in docker_client.containers.list(all=True) if c.name.startswith(rotating_env.prefix)]
