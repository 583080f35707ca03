"""What the Docker engine says of the containers kolla-salt manages, read the same way
by the container manager, its swaps, the health loop and the release checks: the
current ones (one cheap listing), the spec one was created with, the port one behind
haproxy listens on, whether one passes its own check now; and a named volume made
with an id of its own, a container made with what the SDK cannot say."""
import uuid

import docker.errors

from .spec import LABEL_LISTEN_PORT, LABEL_NAME, LABEL_VOLUME_ID, ContainerSpec, declared_spec


def current_entries(client, prefix=""):
    """(name, listing entry) of each current managed container (not a kept-aside
    generation `<name>.gen<N>`) whose name starts with `prefix`, from one cheap
    listing (client.api.containers: labels, names, state, status, image id)."""
    for entry in client.api.containers(all=True, filters={"label": LABEL_NAME}):
        name = (entry.get("Labels") or {}).get(LABEL_NAME, "")
        if name.startswith(prefix) and f"/{name}" in entry.get("Names", []):
            yield name, entry


def labelled_spec(container):
    """The spec a managed container was created with (its kolla.spec label)."""
    return ContainerSpec.from_dict(declared_spec(container.labels), where=f"label of {container.name}")


def listen_port(container, listen):
    """The port a container behind haproxy listens on (one from before blue-green, or
    created before the label, listens on the first of `listen.ports`)."""
    return int(container.labels.get(LABEL_LISTEN_PORT) or listen["ports"][0])


def run_check(container, spec):
    """Runs the spec's health check once through docker exec: (passed, its output)."""
    result = container.exec_run(list(spec.healthcheck.test))
    return result.exit_code == 0, (result.output or b"").decode(errors="replace").strip()[-500:]


def passes_check(container, spec):
    """Whether the container runs and passes its check right now (False while it is
    being restarted)."""
    try:
        container.reload()
        return container.status == "running" and run_check(container, spec)[0]
    except docker.errors.APIError:
        return False


def create_volume(client, name):
    """A named volume with an id of its own (see ContainerManager.ensure_volumes)."""
    return client.volumes.create(name, labels={LABEL_VOLUME_ID: uuid.uuid4().hex})


# A _docker_args key: /proc's system paths unmasked and writable (create_container).
UNCONFINED_SYSTEM_PATHS = "unconfined_system_paths"


def create_container(client, **args):
    """client.containers.create(**args); with args[UNCONFINED_SYSTEM_PATHS], as the
    Docker CLI's --security-opt systempaths=unconfined, which the SDK cannot say: the
    CLI sends it to the engine as empty MaskedPaths and ReadonlyPaths."""
    if not args.pop(UNCONFINED_SYSTEM_PATHS, False):
        return client.containers.create(**args)
    from docker.models.containers import _create_container_args   # how create() builds its request
    request = _create_container_args({**args, "version": client.api._version})
    request["host_config"].update(MaskedPaths=[], ReadonlyPaths=[])
    return client.containers.get(client.api.create_container(**request)["Id"])
