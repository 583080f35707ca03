"""Image builder: one folder per image under images/, Dockerfile.j2 each.

images/<name>/image.yml names the parent image (absent for the root image,
whose parent is a debootstrap rootfs imported into Docker, as no registry is
reachable). Templates extend images/service.Dockerfile.j2 for the shared
header and footer. Every image carries the label kolla.build-hash, a hash of
its build context (the rendered Dockerfile names the parent by image id): an image
whose hash has not changed is not rebuilt, and an image that another tag
already built with the same hash (the release-independent images of a second
release) is tagged, not built again.
"""
import concurrent.futures
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from .. import paths, safeyaml
from ..errors import KollaError, ValidationError

BUILD_HASH_LABEL = "kolla.build-hash"
CA_BUNDLE_NAME = "kolla-ca-bundle.crt"


INSTALL_TYPES = ("binary", "source")


@dataclass
class ImageDef:
    name: str
    folder: Path
    parent: str | None  # None: the rootfs image
    # image.yml `install_types`: what its Dockerfile can build (glance and placement: source only)
    install_types: tuple = INSTALL_TYPES
    # image.yml `user`: the service's user {name, uid, home} (images/macros.j2 service_user)
    user: dict | None = None
    # image.yml `versions` and `libraries`: per release, its PyPI version and its own pins
    # (kolla_salt.declaration.releases puts them in the release table)
    versions: dict = field(default_factory=dict)
    libraries: dict = field(default_factory=dict)


def discover(images_dir=paths.IMAGES_DIR):
    """The image folders; a uid that two images give different users is an error
    naming both files (a volume one image's user owns would be another's)."""
    images, owners, problems = {}, {}, []
    for folder in sorted(p for p in images_dir.iterdir() if (p / "Dockerfile.j2").is_file()):
        meta_file = folder / "image.yml"
        meta = (safeyaml.load_file(meta_file) if meta_file.exists() else {}) or {}
        user = meta.get("user")
        if user is not None:
            if not isinstance(user, dict) or set(user) != {"name", "uid", "home"}:
                problems.append(f"{meta_file}: key 'user' must be {{name, uid, home}}, got {user!r}")
            elif owners.setdefault(user["uid"], (user["name"], meta_file))[0] != user["name"]:
                problems.append(f"{meta_file}: key 'user.uid' {user['uid']} is the uid of user "
                                f"{owners[user['uid']][0]} in {owners[user['uid']][1]}")
        images[folder.name] = ImageDef(folder.name, folder, meta.get("parent"),
                                       tuple(meta.get("install_types", INSTALL_TYPES)), user,
                                       meta.get("versions") or {}, meta.get("libraries") or {})
    if problems:
        raise ValidationError(problems)
    return images


def install_type_problem(image, install_type):
    """Why `image` cannot be built as `install_type`, or None."""
    if install_type not in image.install_types:
        return (f"images/{image.name}/image.yml: the {image.name} image is built only as "
                f"{' or '.join(image.install_types)} (install_types), not {install_type}")
    return None


def remove_if_orphaned(client, image_id):
    """Removes image `image_id` if no tag names it and no container (a kept
    generation among them) uses it; True if it did. An image still needed is
    refused by the engine (409), which is the answer, not an error."""
    import docker.errors
    try:
        if image_id and not client.images.get(image_id).tags:
            client.images.remove(image_id)
            return True
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409:   # 409: used by a container, or a parent of another image
            raise
    return False


def _content_only(info):
    """A context entry without what a checkout changes but the image does not
    see as content (times, owners): a fresh clone must hash like the last."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if info.mode & 0o111 else 0o644
    return info


def build_order(images, wanted):
    """Parents before children; unknown names are an error naming them."""
    unknown = [w for w in wanted if w not in images]
    if unknown:
        raise ValidationError(
            [f"build: unknown image '{u}' (known: {', '.join(sorted(images))})" for u in unknown])
    order = []

    def visit(name, chain=()):
        if name in chain:
            raise KollaError(f"images: parent cycle {' -> '.join(chain + (name,))}")
        if name in order:
            return
        parent = images[name].parent
        if parent:
            if parent not in images:
                raise KollaError(f"images/{name}/image.yml: parent '{parent}' is not an image folder")
            visit(parent, chain + (name,))
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def image_folder(ref):
    """The images/ folder an image reference was built from: ns/keystone:tag -> keystone."""
    return ref.rsplit("/", 1)[-1].split(":")[0]


def image_ref(settings, name, tag=None):
    """[registry/]namespace/name:tag; the tag `kolla-salt build` gives is the release's
    (openstack_tag). With docker_registry, builds are tagged for it and hosts pull from it."""
    registry = settings.get("docker_registry")
    return f"{registry + '/' if registry else ''}{settings['docker_namespace']}/{name}:{tag or settings['openstack_tag']}"


def push(ref, image_id, insecure=False, netns=None):
    """Copies image `ref` (the engine's `image_id`) from this machine's engine to the
    registry its name starts with (skopeo: a registry without TLS needs no engine
    setting, and the push can run in `netns`, the network namespace from which that
    registry is reachable). Returns False, having copied nothing, when the registry
    holds `ref` as this very image already: its manifest names the image's config,
    whose digest is the image's ID (skopeo keeps the config's bytes). Asking costs a
    request; a copy reads the whole image out of the engine first, seconds per image."""
    if not shutil.which("skopeo"):
        raise KollaError("skopeo is not installed: run `make setup`")
    in_netns = ["ip", "netns", "exec", netns] if netns else []
    tls = "false" if insecure else "true"
    held = subprocess.run([*in_netns, "skopeo", "inspect", "--raw", f"--tls-verify={tls}", f"docker://{ref}"],
                          capture_output=True, text=True)
    try:
        if held.returncode == 0 and json.loads(held.stdout).get("config", {}).get("digest") == image_id:
            return False
    except ValueError:   # not a manifest: copied again
        pass
    proc = subprocess.run([*in_netns, "skopeo", "copy", "--quiet", f"--dest-tls-verify={tls}",
                           f"docker-daemon:{ref}", f"docker://{ref}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KollaError(f"pushing {ref} failed: {proc.stderr.strip()[-1000:]}")
    return True


def from_registry(ref):
    """Whether an image reference names a registry (host[:port]/...): such an image is pulled."""
    first = ref.split("/")[0]
    return "/" in ref and ("." in first or ":" in first or first == "localhost")


def image_base(settings):
    """The base the images of `settings` are built on, as their kolla.base label and
    the pillar's service entries say it: debian-trixie."""
    return f"{settings['kolla_base_distro']}-{settings['kolla_base_distro_version']}"


def base_version(base):
    """The kolla_base_distro_version of an image_base: trixie of debian-trixie."""
    return base.split("-", 1)[1]


def rootfs_ref(settings):
    return f"{settings['docker_namespace']}/rootfs-{image_base(settings)}:latest"


def after_parents(order, parent_of, work, threads):
    """Calls work(name) for every name of `order` (parents before children), up to
    `threads` at once, each once its parent (parent_of[name], if in `order`) is done:
    most of an image's build waits on the network (apt, pip), so the images of one
    parent build side by side. Returns {name: what work returned}. A failure lets
    the running calls end, starts no other, and is raised."""
    results, running, failure = {}, {}, None
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        waiting = list(order)
        while waiting or running:
            ready = [] if failure else [name for name in waiting
                                        if parent_of.get(name) not in order or parent_of[name] in results]
            for name in ready[:max(1, threads) - len(running)]:
                waiting.remove(name)
                running[pool.submit(work, name)] = name
            if not running:
                break
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                if future.exception() is not None:
                    failure = failure or future.exception()
                else:
                    results[name] = future.result()
    if failure is not None:
        raise failure
    return results


class Builder:
    """Builds images with the Docker SDK, printing progress to `out`."""

    def __init__(self, client, settings, images_dir=paths.IMAGES_DIR, out=print):
        self.client = client
        self.settings = settings
        self.images_dir = Path(images_dir)
        self.images = discover(self.images_dir)
        self.out = out
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.images_dir)),
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True)

    # -- rootfs ---------------------------------------------------------------
    def ensure_rootfs(self, force=False):
        ref = rootfs_ref(self.settings)
        if not force and self._image(ref) is not None:
            return ref
        release = self.settings["kolla_base_distro_version"]
        if not release:   # raw defaults: load_settings and settings_for_release derive it
            raise KollaError("build: the settings name no base (kolla_base_distro_version is empty)")
        if not shutil.which("debootstrap"):
            raise KollaError("debootstrap is not installed: run `make setup`")
        mirror = self.settings["base_distro_mirror"]
        with tempfile.TemporaryDirectory(prefix="kolla-rootfs-") as root:
            self.out(f"[build] rootfs: debootstrap --variant=minbase {release} (about 30 s)")
            proc = subprocess.run(
                ["debootstrap", "--variant=minbase", release, root, mirror],
                capture_output=True, text=True)
            if proc.returncode != 0:
                raise KollaError(f"debootstrap {release} failed:\n{proc.stderr[-2000:]}")
            self.out(f"[build] rootfs: importing as {ref}")
            tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
            repo, tag = ref.rsplit(":", 1)
            self.client.api.import_image_from_stream(tar.stdout, repository=repo, tag=tag)
            tar.wait()
        return ref

    # -- images ---------------------------------------------------------------
    def _image(self, ref):
        import docker.errors
        try:
            return self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return None

    def render(self, name, parent_id):
        """The Dockerfile of `name`, FROM its parent's image id: a name would make
        the same content under two tags look different (see build_hash)."""
        ctx = dict(self.settings)
        ctx.update(image_name=name, image_user=self.images[name].user, parent_image=parent_id,
                   ca_bundle=self._ca_bundle() is not None, ca_bundle_name=CA_BUNDLE_NAME)
        return self.env.get_template(f"{name}/Dockerfile.j2").render(**ctx)

    def _ca_bundle(self):
        path = self.settings.get("build_ca_bundle")
        if not path:
            return None
        if not os.path.isfile(path):
            raise KollaError(f"globals: build_ca_bundle '{path}' is not a file")
        return path

    def _context(self, name, dockerfile):
        """A tar of the image folder with the rendered Dockerfile (and CA bundle)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            folder = self.images[name].folder
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder).as_posix()
                # __pycache__: left by running a script of the folder; not the image's content
                if path.is_file() and rel not in ("Dockerfile.j2", "image.yml") and "__pycache__" not in path.parts:
                    tar.add(str(path), arcname=rel, recursive=False, filter=_content_only)
            extra = {"Dockerfile": dockerfile.encode()}
            ca = self._ca_bundle()
            if ca:
                extra[CA_BUNDLE_NAME] = Path(ca).read_bytes()
            for arcname, data in extra.items():
                info = tarfile.TarInfo(arcname)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    @staticmethod
    def build_hash(context):
        """The context holds the Dockerfile, which names the parent by id."""
        return hashlib.sha256(context).hexdigest()[:16]

    def build(self, wanted=None, force=False):
        """Builds `wanted` (all by default: those the install type allows) and their parents;
        returns {name: 'built'|'tagged'|'unchanged'}."""
        install_type = self.settings.get("kolla_install_type", "source")
        if wanted:
            problems = [p for p in (install_type_problem(self.images[w], install_type)
                                    for w in wanted if w in self.images) if p]
            if problems:
                raise ValidationError(problems)
        else:
            wanted = [name for name in sorted(self.images)
                      if not install_type_problem(self.images[name], install_type)]
            for name in sorted(set(self.images) - set(wanted)):
                self.out(f"[build] {name}: skipped, no {install_type} image (images/{name}/image.yml)")
        order = build_order(self.images, wanted)
        parent_root = self.ensure_rootfs()
        threads = int(self.settings.get("build_threads") or 1)

        def build_one(name):
            index = order.index(name) + 1
            image = self.images[name]
            ref = image_ref(self.settings, name)
            parent = self._image(image_ref(self.settings, image.parent) if image.parent else parent_root)
            dockerfile = self.render(name, parent.id)
            context = self._context(name, dockerfile)
            wanted_hash = self.build_hash(context)
            current = self._image(ref)
            if not force and current is not None and current.labels.get(BUILD_HASH_LABEL) == wanted_hash:
                self.out(f"[build] ({index}/{len(order)}) {ref}: unchanged")
                return "unchanged", None
            same = None if force else self._image_with_hash(wanted_hash)
            if same is not None:
                repo, tag = ref.rsplit(":", 1)
                same.tag(repo, tag)
                self.out(f"[build] ({index}/{len(order)}) {ref}: same content as {same.tags[0]}, tagged")
                outcome = "tagged"
            else:
                self.out(f"[build] ({index}/{len(order)}) {ref}: building")
                began = time.monotonic()
                self._docker_build(ref, context, wanted_hash, name if threads > 1 else None)
                self.out(f"[build] ({index}/{len(order)}) {ref}: built in {time.monotonic() - began:.0f} s")
                outcome = "built"
            return outcome, current and (ref, current.id)

        done = after_parents(order, {name: self.images[name].parent for name in order}, build_one, threads)
        result = {name: outcome for name, (outcome, _) in done.items()}
        # Children first: an old parent is still needed by the old child images.
        for ref, image_id in (done[name][1] for name in reversed(order) if done[name][1]):
            if remove_if_orphaned(self.client, image_id):
                self.out(f"[build] removed the image {ref} had before ({image_id[7:19]}): nothing uses it")
        return result

    def _image_with_hash(self, build_hash):
        found = [i for i in self.client.images.list(filters={"label": f"{BUILD_HASH_LABEL}={build_hash}"}) if i.tags]
        return found[0] if found else None

    def _docker_build(self, ref, context, build_hash, name=None):
        """Builds `ref`; its step lines name the image (`name`) when builds run side by side."""
        stream = self.client.api.build(
            fileobj=io.BytesIO(context), custom_context=True, tag=ref, rm=True, forcerm=True,
            decode=True, labels={BUILD_HASH_LABEL: build_hash}, pull=False)
        tail = []
        for chunk in stream:
            if "error" in chunk:
                raise KollaError(f"building {ref} failed: {chunk['error'].strip()}\n" + "".join(tail[-30:]))
            line = chunk.get("stream", "")
            if line:
                tail.append(line)
                if re.match(r"Step \d+/\d+ :", line):
                    self.out(f"[build]   {name + ': ' if name else ''}{line.strip()[:160]}")
