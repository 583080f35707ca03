"""What a deploy checks on a host before it changes anything there: the services asked
for are declared for the host, every image they run is on it (or comes from a
registry, which the host pulls), no container changes release in a way OpenStack
does not support, and none changes base. kolla.deploy's first state
(kolla_container.deployable) runs them where the containers are, so one host's
`deploy` and a master's prediction on each of its hosts check alike, each with its
own engine and the pillar Salt compiled."""
from ..errors import ValidationError
from ..images.build import from_registry
from .inventory import service_specs
from .releases import base_move_problems, load_releases, release_path_problems, running_images

JUMP_HINT = ("upgrade through the releases between, or pass --allow-release-jump if you have checked "
             "that every service's migrations allow it")


def unknown_services(declared, asked, where="--services"):
    """A problem per name of `asked` that is not a service of `declared` (names)."""
    return [f"{where}: unknown or disabled service '{name}' (deployable here: {', '.join(declared)})"
            for name in asked if name not in declared]


def judged_jumps(jumps, allow_jump):
    """(problems, notes) of release_path_problems' lines: refused, or allowed with
    --allow-release-jump (True) or a reason (a string) said beside each."""
    if not jumps:
        return [], []
    if allow_jump:
        said = allow_jump if isinstance(allow_jump, str) else "--allow-release-jump"
        return [], [f"{said}: {jump}" for jump in sorted(set(jumps))]
    return sorted(set(jumps)) + [JUMP_HINT], []


def check_release_paths(hosts, allow_jump):
    """Refuses, before anything changes, a release change OpenStack does not support
    (kolla_salt.declaration.releases.upgrade_path_problem) unless --allow-release-jump, which is
    said instead. `hosts`: {host (None: this host): (the services declared there,
    {container: the release it runs})}: what runs is known by the kolla.release
    label of its image (facts of a master's minions carry them too)."""
    releases = load_releases()
    problems, notes = judged_jumps([problem for host, (services, running) in hosts.items()
                                    for problem in release_path_problems(releases, services, running, host)],
                                   allow_jump)
    for note in notes:
        print(f"[deploy] {note}")
    if problems:
        raise ValidationError(problems)


def missing_images(client, services):
    """A problem per image `services` (pillar entries) run that is not on the engine,
    except a held container's (pins.yml: it runs its recorded image, which its state
    checks) and a registry's."""
    import docker.errors
    # One listing of the engine's tags (a call per image took a tenth of a no-op deploy);
    # a name the listing spells otherwise is asked for by itself.
    tagged = {tag for image in client.api.images() for tag in image.get("RepoTags") or ()}
    missing = set()
    for service in services:
        held = {c["spec"]["name"] for c in service["containers"] if c.get("pin") is not None}
        for spec in service_specs(service):
            if spec["name"] in held or from_registry(spec["image"]) or spec["image"] in tagged:
                continue
            try:
                client.images.get(spec["image"])
            except docker.errors.ImageNotFound:
                missing.add(f"{service['name']}: image {spec['image']} is not on this host (run `kolla-salt build`)")
    return sorted(missing)


def deploy_checks(client, services, asked, prefix, allow_jump=False):
    """(problems, notes) of a deploy of `asked` (names; all of `services`, the host's
    pillar entries, when empty) on the engine of `client`."""
    problems = unknown_services([s["name"] for s in services], asked)
    selected = [s for s in services if not asked or s["name"] in asked]
    running = running_images(client, prefix)   # one reading of the engine for both checks
    releases = {name: release for name, (release, _) in running.items() if release}
    refused, notes = judged_jumps(release_path_problems(load_releases(), selected, releases), allow_jump)
    moves = base_move_problems(selected, {name: base for name, (_, base) in running.items() if base})
    return problems + refused + moves + missing_images(client, selected), notes
