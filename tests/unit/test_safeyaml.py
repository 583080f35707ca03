"""kolla_salt.safeyaml.load_file: a file's document parsed once while its text is the
same, and each caller free to change what it gets."""
from kolla_salt import safeyaml


def test_a_file_rewritten_at_once_with_text_of_the_same_length_is_read_again(tmp_path):
    # The same length, written at once: where file times are coarse, the same size and times.
    path = tmp_path / "globals.yml"
    path.write_text("enable_glance: yes\n")
    assert safeyaml.load_file(path) == {"enable_glance": True}
    path.write_text("enable_glance: no!\n")
    assert safeyaml.load_file(path) == {"enable_glance": "no!"}


def test_what_a_caller_changes_is_not_what_the_next_one_reads(tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text("fernet: {volume: keystone_fernet_tokens, owner: keystone}\n")
    safeyaml.load_file(path)["fernet"]["owner"] = 42400
    assert safeyaml.load_file(path) == {"fernet": {"volume": "keystone_fernet_tokens", "owner": "keystone"}}


def test_a_missing_file_is_not_found_as_before(tmp_path):
    import pytest
    with pytest.raises(FileNotFoundError):
        safeyaml.load_file(tmp_path / "absent.yml")
