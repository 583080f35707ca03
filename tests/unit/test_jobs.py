"""When a job runs (ContainerManager.job_pending): once per combination of spec,
image, config and filled volumes; a converging one also when its spec changed since
its last success."""
from kolla_salt.containers.manager import ContainerManager
from kolla_salt.containers.spec import ContainerSpec


def job(converges, env="tls"):
    return ContainerSpec.from_dict({"name": "t-register", "image": "toolbox", "restart_policy": "no",
                                    "environment": {"ENDPOINTS": env}, "converges": converges}, "job")


def manager(tmp_path, images):
    """A manager whose jobs' identities differ only by spec and the image named in `images`."""
    jobs = ContainerManager(client=object(), state_dir=tmp_path)
    jobs._check_image = lambda spec: type("Image", (), {"id": images[0]})
    jobs._volume_identity = lambda volume: volume
    return jobs


def test_a_migration_does_not_run_again_going_back_to_what_it_ran(tmp_path):
    images = ["new"]
    jobs = manager(tmp_path, images)
    jobs.record_success(job(False, "a"))
    jobs.record_success(job(False, "b"))
    assert not jobs.job_pending(job(False, "a"))     # an older db_sync against a schema migrated forward


def test_a_converging_job_runs_when_its_spec_goes_back_but_not_when_only_its_image_does(tmp_path):
    images = ["good"]
    jobs = manager(tmp_path, images)
    jobs.record_success(job(True, "http"))
    jobs.record_success(job(True, "https"))                    # TLS on
    assert jobs.job_pending(job(True, "http"))       # TLS off: the catalog goes back
    jobs.record_success(job(True, "http"))
    images[0] = "broken"                             # a failed upgrade's image ran it
    assert jobs.job_pending(job(True, "http"))
    jobs.record_success(job(True, "http"))
    images[0] = "good"                               # gone again: nothing to do
    assert not jobs.job_pending(job(True, "http"))
