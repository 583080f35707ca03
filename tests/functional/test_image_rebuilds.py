"""Image builds on the real engine: a rebuilt tag cleans up after itself."""
import shutil
import uuid

import docker.errors
import pytest

from kolla_salt import paths
from kolla_salt.declaration.settings import default_image, default_settings, settings_for_release
from kolla_salt.images.build import Builder, image_ref

pytestmark = pytest.mark.functional
BASE = default_image("base")   # what built_images("base") builds


def test_a_rebuilt_tag_leaves_no_unused_image_behind(docker_client, built_images, tmp_path):
    """Every rebuild used to leave the tag's old image dangling (GBs after a few
    releases). The old image goes when nothing uses it; an image a container
    still uses (a kept generation: rollback needs it) stays."""
    built_images("base")
    images_dir = tmp_path / "images"
    shutil.copytree(paths.IMAGES_DIR, images_dir)
    tiny = images_dir / "kst-tiny"
    tiny.mkdir()
    (tiny / "image.yml").write_text("parent: base\n")
    (tiny / "Dockerfile.j2").write_text("FROM {{ parent_image }}\nCOPY marker /marker\n")
    defaults = default_settings()   # as load_settings derives them: the release's base
    settings = {**settings_for_release(defaults, defaults["openstack_release"]),
                "openstack_tag": f"kst{uuid.uuid4().hex[:6]}"}
    ref = image_ref(settings, "kst-tiny")
    said = []
    builder = Builder(docker_client, settings, images_dir=images_dir, out=said.append)
    built, user = [], None

    def build(marker):
        (tiny / "marker").write_text(marker)
        builder.build(["kst-tiny"])
        built.append(docker_client.images.get(ref).id)

    try:
        build("1")
        build("2")
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(built[0])
        assert any("removed the image" in line for line in said)
        user = docker_client.containers.create(built[1], command=["true"], name=f"{settings['openstack_tag']}-user")
        build("3")
        assert docker_client.images.get(built[1]).id == built[1]   # still used: kept
        # The parent's content did not change: the test's tag names the same image, not a rebuild.
        assert docker_client.images.get(image_ref(settings, "base")).id == docker_client.images.get(BASE).id
    finally:
        if user is not None:
            user.remove(force=True)
        for image in [ref, image_ref(settings, "base"), *built]:
            try:
                docker_client.images.remove(image, force=True)
            except docker.errors.ImageNotFound:
                pass
