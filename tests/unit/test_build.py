"""Image build contexts: what decides whether an image is rebuilt."""
import os
import shutil

import pytest

from kolla_salt import paths
from kolla_salt.declaration.settings import default_settings
from kolla_salt.errors import ValidationError
from kolla_salt.images.build import Builder, discover


def context_of(images_dir, name="base"):
    builder = Builder(client=None, settings=default_settings(), images_dir=images_dir)
    return builder._context(name, "FROM sha256:0\n")


def test_a_fresh_checkout_hashes_like_the_last_and_a_content_change_does_not(tmp_path):
    """A new clone has new file times (and maybe another umask): its images must
    not all be rebuilt. A changed script must."""
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(paths.IMAGES_DIR, first)
    shutil.copytree(paths.IMAGES_DIR, second)
    for path in (second / "base").rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
        if path.is_file():
            path.chmod(path.stat().st_mode | 0o020)   # group-writable, as under umask 002
    assert Builder.build_hash(context_of(first)) == Builder.build_hash(context_of(second))

    script = next(p for p in sorted((second / "base").rglob("*")) if p.is_file() and p.name != "image.yml"
                  and p.name != "Dockerfile.j2")
    script.write_text(script.read_text() + "\n# changed\n")
    assert Builder.build_hash(context_of(first)) != Builder.build_hash(context_of(second))


def test_a_registry_prefixes_image_references_and_marks_them_pulled():
    from kolla_salt.images.build import from_registry, image_ref
    settings = {"docker_namespace": "kolla-salt", "openstack_tag": "2026.1-source", "docker_registry": ""}
    assert image_ref(settings, "keystone") == "kolla-salt/keystone:2026.1-source"
    assert not from_registry(image_ref(settings, "keystone"))
    settings["docker_registry"] = "198.18.0.1:5000"
    assert image_ref(settings, "keystone") == "198.18.0.1:5000/kolla-salt/keystone:2026.1-source"
    assert from_registry(image_ref(settings, "keystone"))
    assert from_registry("registry.example.org/kolla/keystone:1") and from_registry("localhost/kolla/keystone:1")


def test_an_image_is_built_only_as_the_install_types_its_folder_names():
    """images/<name>/image.yml `install_types`: glance has no binary (Debian) image."""
    assert discover()["keystone"].install_types == ("binary", "source")
    builder = Builder.__new__(Builder)   # no engine: a named image refused before any build
    builder.images, builder.settings = discover(), {"kolla_install_type": "binary"}
    with pytest.raises(ValidationError, match="images/glance/image.yml: the glance image is built only as source"):
        builder.build(["glance"])


def test_an_images_user_comes_from_its_folder_and_a_uid_of_two_users_is_refused(tmp_path):
    """image.yml `user` makes the service user of its Dockerfile (the uid a volume's
    files keep across images and releases); a uid another image gives another user
    is refused naming both files."""
    images = tmp_path / "images"
    shutil.copytree(paths.IMAGES_DIR, images)
    from kolla_salt.declaration.settings import settings_for_release
    settings = settings_for_release(default_settings(), default_settings()["openstack_release"])
    builder = Builder(client=None, settings=settings, images_dir=images)
    assert "useradd --system --uid 42425 --gid keystone --home-dir /var/lib/keystone" in builder.render(
        "keystone", "sha256:0")
    (images / "memcached" / "image.yml").write_text(
        "parent: base\nuser: {name: memo, uid: 42425, home: /var/lib/memo}\n")
    with pytest.raises(ValidationError) as refused:
        discover(images)
    assert refused.value.problems == [f"{images / 'memcached' / 'image.yml'}: key 'user.uid' 42425 is the uid of "
                                      f"user keystone in {images / 'keystone' / 'image.yml'}"]


@pytest.mark.parametrize("held, copied", [
    ('{"config": {"digest": "sha256:aaa"}}', False),   # this very image: nothing read out of the engine
    ('{"config": {"digest": "sha256:bbb"}}', True),    # the tag names another image there
    ('{"manifests": []}', True),                        # a list, not this image's manifest
    ("not json", True),
    (None, True),                                       # no such tag in the registry
])
def test_a_push_copies_unless_the_registry_holds_this_very_image(monkeypatch, held, copied):
    import subprocess

    from kolla_salt.images import build
    ran = []

    def run(command, **kwargs):
        ran.append(command)
        if "inspect" in command:
            return subprocess.CompletedProcess(command, 1 if held is None else 0, held or "", "")
        return subprocess.CompletedProcess(command, 0, "", "")
    monkeypatch.setattr(build.shutil, "which", lambda name: "/usr/bin/skopeo")
    monkeypatch.setattr(build.subprocess, "run", run)
    assert build.push("198.18.0.1:5000/kolla-salt/memcached:x", "sha256:aaa", insecure=True) is copied
    assert any("copy" in command for command in ran) is copied


def test_images_build_side_by_side_each_after_its_parent_and_a_failure_starts_no_other():
    """`build_threads` images at once: no child starts before its parent is built, the
    children of one parent overlap, and a failed build lets the running ones end but
    starts none after it (the error is the failed build's)."""
    import threading
    import time

    from kolla_salt.images.build import after_parents
    parent_of = {"base": None, "toolbox": "base", "keystone": "base", "nova": "base", "ovn": "openvswitch",
                 "openvswitch": "base"}
    order = ["base", "toolbox", "keystone", "nova", "openvswitch", "ovn"]
    lock, events, at_once = threading.Lock(), [], []

    def work(name, fail=()):
        with lock:
            events.append(("start", name))
            at_once.append(sum(1 if kind == "start" else -1 for kind, _ in events))
        time.sleep(0.05)
        with lock:
            events.append(("end", name))
        if name in fail:
            raise RuntimeError(f"building {name} failed")
        return f"built {name}"

    done = after_parents(order, parent_of, work, threads=3)
    assert done == {name: f"built {name}" for name in order}
    for child, parent in parent_of.items():
        if parent:
            assert events.index(("end", parent)) < events.index(("start", child)), events
    assert max(at_once) == 3

    events.clear()
    with pytest.raises(RuntimeError, match="building base failed"):
        after_parents(order, parent_of, lambda name: work(name, fail=("base",)), threads=3)
    assert events == [("start", "base"), ("end", "base")]
