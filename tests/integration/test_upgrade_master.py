"""The upgrade orchestration the Salt way: `salt-run state.orchestrate kolla.upgrade`
on a real salt-master (pytest-salt-factories) driving a real minion, whose
pillar the master builds from the operator's folder (pillar/kolla.sls).

memcached is moved to another image (other content, another tag): the orchestration replaces it through
the minion's kolla_container states (atomic swap, generation + 1, the old
generation kept aside), and a second run finds nothing to do."""
import io
import uuid

import pytest

from salt_master import master_and_minion
from conftest import IMAGES

pytestmark = pytest.mark.integration


@pytest.fixture
def deployment(tmp_path, docker_client, built_images):
    from conftest import KollaEnv
    built_images("memcached")
    env = KollaEnv(tmp_path, f"kstorch{uuid.uuid4().hex[:6]}-")
    env.write_globals(enable_mariadb=False, enable_rabbitmq=False, enable_keystone=False)
    env.run("deploy")
    yield env
    env.cleanup(docker_client)


@pytest.fixture
def salt_pair(salt_factories, deployment):
    with master_and_minion(salt_factories, "kstorch", deployment.config_dir) as pair:
        yield pair


def orchestrate(master, minion, *args):
    return master.salt_run_cli(timeout=600).run(
        "state.orchestrate", "kolla.upgrade", *args,
        pillar={"kolla_services": ["memcached"], "kolla_batch": 1})


def test_orchestrated_upgrade_through_a_master_replaces_memcached_atomically(
        salt_pair, deployment, docker_client):
    master, minion = salt_pair
    name = deployment.name("memcached")
    old = docker_client.containers.get(name)
    assert old.labels["kolla.generation"] == "1"
    new_tag = f"{deployment.prefix}next"
    # Other content: a new tag of the same image is the same container (compared by id).
    docker_client.images.build(fileobj=io.BytesIO(f"FROM {old.image.id}\nLABEL kst.next=1\n".encode()),
                               tag=f"{IMAGES}/memcached:{new_tag}", rm=True)
    try:
        deployment.write_globals(memcached_tag=new_tag)
        predicted = orchestrate(master, minion, "test=True")   # one state run of the minion, changing nothing
        assert predicted.returncode == 0, predicted.stdout + predicted.stderr
        assert "kolla-upgrade-predict" in predicted.stdout and f"{name} would be recreated" in predicted.stdout
        # kolla_services reached the minion: a run of some services removes nothing undeclared.
        assert "kolla-deploy-only-declared-containers" not in predicted.stdout, predicted.stdout
        assert docker_client.containers.get(name).id == old.id
        ret = orchestrate(master, minion)
        assert ret.returncode == 0, ret.stdout + ret.stderr
        current = docker_client.containers.get(name)
        assert current.attrs["Config"]["Image"] == f"{IMAGES}/memcached:{new_tag}"
        assert current.labels["kolla.generation"] == "2" and current.status == "running"
        port = deployment.globals["memcached_port"]
        assert current.exec_run(["kolla_check", "memcached", f"127.0.0.1:{port}"]).exit_code == 0
        kept = docker_client.containers.get(f"{name}.gen1")
        assert kept.id == old.id and kept.status == "exited"

        again = orchestrate(master, minion)
        assert again.returncode == 0, again.stdout + again.stderr
        assert docker_client.containers.get(name).id == current.id   # converged: nothing replaced
    finally:
        deployment.cleanup(docker_client)   # its containers use the image
        docker_client.images.remove(f"{IMAGES}/memcached:{new_tag}")
