"""The table of known OpenStack releases (pillar/defaults/releases.yml), with the
versions and library pins of each image folder (images/<image>/image.yml)."""

from .. import paths, safeyaml
from ..errors import ValidationError
from ..images.build import base_version, discover


def load_releases():
    """{release: {series, binary, source: {project: version}, libraries: {project:
    [pip specifier]}, constraints: [pip specifier]}}, oldest first. A release an image
    names that the table does not know is an error naming the image's file."""
    releases = safeyaml.load_file(paths.DEFAULTS_DIR / "releases.yml")
    problems = []
    for image in discover(paths.IMAGES_DIR).values():
        for part, key in (("versions", "source"), ("libraries", "libraries")):
            for release, value in getattr(image, part).items():
                if release not in releases:
                    problems.append(f"{image.folder / 'image.yml'}: key '{part}.{release}' is not a release of "
                                    f"pillar/defaults/releases.yml ({', '.join(releases)})")
                else:
                    releases[release].setdefault(key, {})[image.name] = value
    if problems:
        raise ValidationError(problems)
    return releases


def series(releases, name):
    """(year, half) of a release: 2026.1 -> (2026, 1); zed (2022.2) -> (2022, 2)."""
    year, half = releases[name]["series"].split()[0].split(".")
    return int(year), int(half)


def upgrade_path_problem(releases, old, new):
    """Why `old` -> `new` is not an upgrade OpenStack supports, or None if it is:
    the next release (N -> N+1), or from a .1 release to the next .1 (SLURP)."""
    (year, half), target = series(releases, old), series(releases, new)
    if target == (year, half):
        return None
    if target < (year, half):
        return (f"{old} -> {new} is a downgrade: database schemas only migrate forward "
                f"(to go back with the data, `kolla-salt rollback --release {new}`)")
    if target == ((year, 2) if half == 1 else (year + 1, 1)) or half == 1 and target == (year + 1, 1):
        return None
    return (f"{old} -> {new} skips releases: OpenStack upgrades one release at a time, or from "
            f"a .1 release to the next .1 (SLURP: 2025.1 -> 2026.1)")


def release_path_problems(releases, services, running, host=None):
    """Each release change of `services` (pillar entries) OpenStack does not support,
    as a line naming `host` when given: what runs is `running` ({container: the
    release its image was built for}), what is declared the service's release. A
    container held at a generation (pins.yml) keeps what it ran."""
    problems = []
    for service in services:
        for container in service["containers"]:
            if container.get("pin") is not None:
                continue
            old = running.get(container["spec"]["name"])
            problem = old in releases and upgrade_path_problem(releases, old, service["release"])
            if problem:
                problems.append(f"{host + ': ' if host else ''}{service['name']}: runs {old}, "
                                f"declared {service['release']}: {problem}")
    return problems


def skew_problems(releases, declared, behind):
    """OpenStack's version rules between services (kolla-salt's `runs_behind`: nova
    supports computes one release older than its control services, never newer):
    declared {service: its release}, behind {service: the service it may run at most
    one release behind, never ahead}. A problem per service that breaks its rule,
    naming what to upgrade first."""
    problems = []
    for service, leader in sorted(behind.items()):
        if service not in declared or leader not in declared:
            continue
        mine, theirs = declared[service], declared[leader]
        rule = (f"{service} runs at most one release behind {leader}, never ahead "
                f"(salt/states/kolla/{service}/service.yaml: runs_behind)")
        if series(releases, mine) > series(releases, theirs):
            problems.append(f"{service} would run {mine}, newer than {leader} at {theirs}: {rule}; "
                            f"upgrade {leader} to {mine} first, then {service}")
        elif upgrade_path_problem(releases, mine, theirs):
            problems.append(f"{service} would run {mine}, more than one release behind {leader} at {theirs}: "
                            f"{rule}; upgrade {service} first")
    return problems


def base_move_problems(services, running, host=None):
    """A problem per container of `services` (pillar entries) whose image is built on
    another base than its service declares (`running`: {container: its image's base})
    when its folder says why it cannot cross by a swap (`base_move`: RabbitMQ and
    MariaDB change major versions with the base), as a line naming `host` when given.
    Every other container crosses by its usual swap, an upgrade like any other. A
    container held at a generation (pins.yml) keeps what it ran."""
    problems = []
    for service in services:
        for container in service["containers"]:
            old = running.get(container["spec"]["name"])
            if service.get("base_move") and container.get("pin") is None and old and old != service["base"]:
                problems.append(f"{host + ': ' if host else ''}{service['name']}: {container['spec']['name']} runs "
                                f"on {old} images, declared {service['base']}: {service['base_move']}; "
                                f"`kolla-salt upgrade --base {base_version(service['base'])}` holds it on "
                                f"{base_version(old)} (pins.yml) while the rest moves")
    return problems


# Images kolla-salt built before it labelled their base were all built on bookworm.
UNLABELLED_BASE = "debian-bookworm"


def running_images(client, prefix=""):
    """{managed container: (the release its image was built for or None, its base or
    None)} on one engine, of the containers whose name starts with `prefix`. Only images
    whose content depends on the release carry a release; images not built by
    kolla-salt have no base."""
    import docker.errors

    from ..containers.engine import current_entries
    from ..containers.spec import LABEL_BASE, LABEL_RELEASE
    from ..images.build import BUILD_HASH_LABEL
    images, found = {}, {}
    for name, entry in current_entries(client, prefix):
        if entry["ImageID"] not in images:
            try:
                labels = client.api.inspect_image(entry["ImageID"])["Config"].get("Labels") or {}
            except docker.errors.NotFound:
                labels = {}
            base = labels.get(LABEL_BASE) or (UNLABELLED_BASE if BUILD_HASH_LABEL in labels else None)
            images[entry["ImageID"]] = (labels.get(LABEL_RELEASE), base)
        found[name] = images[entry["ImageID"]]
    return found


def running_releases(client, prefix=""):
    """{managed container: the release its image was built for} on one engine (those
    whose image says; running_images)."""
    return {name: release for name, (release, _) in running_images(client, prefix).items() if release}
