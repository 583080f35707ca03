from kolla_salt.containers import generations
from kolla_salt.containers.manager import capabilities_missing_from_bounding_set
from kolla_salt.private import redact, redacted_lines


def test_generations_grow_and_last_good_skips_failed(tmp_path):
    history = generations.History(tmp_path, "keystone")
    assert history.last_generation() == 0
    for number in (1, 2, 3):
        history.add(number, {"image": f"ks:{number}"}, f"sha:{number}", "c")
    history.set_outcome(1, generations.REPLACED)
    history.set_outcome(2, generations.FAILED)
    assert history.last_generation() == 3
    assert history.last_good_before(3)["image"] == "ks:1"
    assert history.last_good_before(1) is None
    assert history.last_good_before(3, skip=lambda record: record["spec"]["image"] == "ks:1") is None
    assert (history.file.stat().st_mode & 0o777) == 0o600


def test_config_snapshot_is_a_copy(tmp_path):
    source = tmp_path / "etc"
    source.mkdir()
    (source / "keystone.conf").write_text("[DEFAULT]\n")
    history = generations.History(tmp_path / "state", "keystone")
    snapshot = history.snapshot_config(4, source)
    (source / "keystone.conf").write_text("changed")
    assert (snapshot / "keystone.conf").read_text() == "[DEFAULT]\n"


def test_missing_capabilities_come_from_the_bounding_set(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapBnd:\t000001fffeffffff\n")
    assert capabilities_missing_from_bounding_set(str(status)) == ["SYS_RESOURCE"]
    status.write_text("CapBnd:\t000001ffffffffff\n")
    assert capabilities_missing_from_bounding_set(str(status)) == []


def test_redact_hides_every_secret():
    assert redact("user admin pass s3cr3tpw", ["s3cr3tpw", ""]) == "user admin pass ********"


def test_a_followed_log_is_redacted_even_where_a_chunk_splits_a_secret():
    chunks = [b"first line\nconnecting with s3cr", b"3tpw to the db\n", b"last, no newline s3cr3tpw"]
    assert list(redacted_lines(chunks, ["s3cr3tpw"])) == [
        "first line\n", "connecting with ******** to the db\n", "last, no newline ********"]


def test_one_generation_runs_at_a_time(tmp_path):
    """History never claims two running generations: the one taking over is RUNNING,
    the one before it replaced, one whose swap never finished failed."""
    history = generations.History(tmp_path, "keystone")
    for number in (1, 2, 3):
        history.add(number, {"image": f"ks:{number}"}, f"sha:{number}", "c")
    history.set_running(1)
    history.set_running(3)
    assert [r["outcome"] for r in history.records()] == ["replaced", "failed", "running"]
    history.set_removed()
    assert [r["outcome"] for r in history.records()] == ["replaced", "failed", "removed"]
    assert history.last_good_before(4)["generation"] == 3   # a removed one ran healthy: a rollback target


def test_recorded_names_are_those_with_a_history(tmp_path):
    generations.History(tmp_path, "kst-a").add(1, {"image": "x"}, "sha256:" + "0" * 64, "c")
    (tmp_path / "containers" / "kst-b").mkdir()
    assert generations.recorded_names(tmp_path) == ["kst-a"]
    assert generations.recorded_names(tmp_path / "nowhere") == []
