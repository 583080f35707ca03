"""The service folders rendered: each one's service.yaml (its containers, jobs,
load-balancer entry and registration) and its templates (config files), Jinja over
the settings, the passwords and a host's facts (kolla_salt.declaration.hostfacts)."""
import functools
import json

import jinja2

from .. import paths, safeyaml
from ..images.build import image_ref


@functools.lru_cache(maxsize=None)
def _service_templates():
    """The Jinja environment of the service folders, one per process: it keeps the
    templates it compiled (compiling them was most of a pillar's build time) and
    compiles one again once its file changes. The master builds a pillar for every
    minion of every step, the CLI one for every host. Compiled templates are kept
    between processes too (Jinja's per-user cache folder, mode 0700, keyed by each
    source's checksum): a no-op deploy compiles each of them twice otherwise."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.SERVICES_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             bytecode_cache=jinja2.FileSystemBytecodeCache())
    env.filters["to_json"] = json.dumps
    return env


# The keys a folder's definition may hold (docs/service-folder.md says each): a
# misspelt one would be ignored in silence.
DEFINITION_KEYS = ("role", "needs", "runs_behind", "serial", "pause_between_hosts", "rollout", "caches_database",
                   "restore_forgets", "loadbalancer", "register", "lists", "containers", "jobs")


def unknown_definition_keys(service, definition):
    """A problem per top-level key of `service`'s definition that no code reads."""
    return [f"salt/states/kolla/{service}/service.yaml: unknown key '{key}' (docs/service-folder.md lists "
            f"those a folder may hold: {', '.join(DEFINITION_KEYS)})"
            for key in sorted(set(definition) - set(DEFINITION_KEYS))]


class ServiceRenderer:
    """Renders a service folder's service.yaml and templates against the settings."""

    def __init__(self, settings, passwords, host):
        self.settings, self.passwords, self.host = settings, passwords, host
        self.env = _service_templates()

    def context(self):
        return {**self.settings, **self.passwords, **self.host}

    def image(self, name, container=None):
        """The image a container (or job) runs: its own <container>_tag pins one, else
        its image's <name>_tag, else the release's tag. A container's own tag lets one
        set move alone: nova_compute_tag upgrades compute-operation's nova-compute while
        the control set's nova containers keep nova_tag."""
        return image_ref(self.settings, name,
                         self.settings.get(f"{container}_tag") or self.settings.get(f"{name}_tag"))

    def definition(self, service):
        text = self.env.get_template(f"{service}/service.yaml").render(**self.context())
        definition = safeyaml.load(text) or {}
        # Docker's own checks run at one pace for all (health_docker_interval): each
        # costs a process in the container, and the health loop counts their passes.
        for container in (definition.get("containers") or {}).values():
            check = container.get("healthcheck") if isinstance(container, dict) else None
            if isinstance(check, dict):
                check.setdefault("interval", self.settings["health_docker_interval"])
        return definition

    def template(self, service, name, **extra):
        return self.env.get_template(f"{service}/templates/{name}").render(**self.context(), **extra)
