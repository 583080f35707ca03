"""Before and beside a deploy: the operator's files (passwords, keys, certificates,
settings), images, the first server, compute hosts, the lab."""
import argparse
import json
import secrets as random_secrets
import time
from pathlib import Path

import yaml

from .. import paths, safeyaml
from ..declaration.settings import wanted_passwords
from ..errors import ValidationError
from ..private import write_private
from .common import _client, _release, _settings, _validated_pillar


def cmd_genpwd(args):
    """Fills missing passwords, keeps existing ones; the file is mode 0600."""
    wanted = wanted_passwords()
    path = Path(args.config_dir) / "passwords.yml"
    current = safeyaml.load(path.read_text()) if path.exists() else {}
    current = current or {}
    added = [k for k in wanted if not current.get(k)]
    for key in added:
        current[key] = random_secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, yaml.safe_dump(current, default_flow_style=False))
    print(f"{path}: {len(added)} password(s) generated, {len(current) - len(added)} kept (mode 0600)")
    _make_key_repositories(args.config_dir)


def _make_key_repositories(config_dir):
    """The key repositories services declare (kolla_salt.operations.keys) that the operator folder
    lacks: those a volume on this host already holds (a deployment made before kolla-salt
    kept them here) are adopted, the others made."""
    from ..operations import keys
    prefix = _settings(argparse.Namespace(config_dir=config_dir))["container_name_prefix"]
    for service, repositories in keys.declared().items():
        for name, entry in repositories.items():
            path = keys.repository_path(config_dir, service, name)
            try:
                keys.load(path)
                continue
            except ValidationError:
                if path.exists():
                    raise
            found = _volume_keys_here(prefix + entry["volume"])
            keys.save(path, found or keys.new_repository())
            keys.load(path)   # adopted keys are checked as well
            print(f"{path}: " + (f"adopted from the volume {prefix}{entry['volume']} on this host" if found
                                 else "made") + " (mode 0600)")


def _volume_keys_here(volume):
    """The keys a volume of this host's engine holds ({} without an engine or volume)."""
    import docker.errors

    from ..operations import keys
    try:
        return keys.volume_keys(_client(), volume)
    except docker.errors.DockerException:
        return {}


def cmd_certificates(args):
    """A private CA (kept once made) and the certificate of each endpoint TLS is on for
    (kolla_salt.operations.certificates: haproxy.pem for the external VIP and FQDN,
    haproxy-internal.pem for the internal VIP, the external one when neither is on;
    backend-cert.pem and backend-key.pem for the API address of this host, or of every
    host through a master); a current one is kept while it is valid for more than 30
    days and covers them, unless --renew."""
    from ..operations import certificates
    if not 1 <= args.days <= 3650:
        raise ValidationError([f"--days: between 1 and 3650, got {args.days}"])
    settings = _with_api_addresses(args, _settings(args))
    wanted = certificates.enabled(settings) or [certificates.EXTERNAL]
    empty = [f"{args.config_dir}/globals.yml: key '{endpoint.names[-1]}' is empty: {endpoint.pem} is for that "
             f"address" for endpoint in wanted if not endpoint.covers(settings)]
    if empty:
        raise ValidationError(empty)
    if not args.renew:
        for endpoint in list(wanted):
            try:
                path, _, expiry = certificates.checked(settings, args.config_dir, endpoint)
            except ValidationError:
                continue
            if not certificates.expiring(expiry):
                print(f"{path}: kept, valid until {expiry:%Y-%m-%d} for {', '.join(endpoint.covers(settings))} "
                      f"(--renew makes a new one)")
                wanted.remove(endpoint)
        if not wanted:
            return 0
    certificates.make(certificates.certificates_dir(settings, args.config_dir), {endpoint.pem: endpoint.covers(settings) for endpoint in wanted}, args.days)
    print("the next `kolla-salt deploy` serves " + ("them" if len(wanted) > 1 else "it")
          + ("" if certificates.enabled(settings) else " once globals.yml sets kolla_enable_tls_external: true"))
    return 0


def _with_api_addresses(args, settings):
    """`settings` with the API addresses of the hosts as api_interface_address, when
    backend TLS is on: the names its certificate covers (certificates.BACKEND)."""
    if not settings["kolla_enable_tls_backend"]:
        return settings
    from ..declaration.hostfacts import interface_address
    return {**settings, "api_interface_address": sorted(interface_address(settings, found)
                                                        for found in args.road.interfaces().values()
                                                        if found is not None)}


def cmd_validate(args):
    pillar = _validated_pillar(args)
    services = pillar["kolla"]["services"]
    print(f"{args.config_dir}: valid; {len(services)} service(s) for this host: "
          + ", ".join(s["name"] for s in services))
    from ..declaration.settings import validation_lines
    for line in validation_lines([s["name"] for s in services], pillar["kolla"]["settings"]):
        print(line)


def cmd_releases(args):
    """The releases whose whole cloud kolla-salt's tests prove (releases.yml `cloud`),
    on the bases they prove it; with --all every release it can build, the bases each
    builds on (the default first), and what is proven of each."""
    from ..declaration.releases import load_releases
    for name, release in load_releases().items():
        proven = release.get("cloud") or []
        if not (args.all or proven):
            continue
        types = [t for t in ("binary", "source") if release.get(t)]
        versions = ", ".join(f"{p} {v}" for p, v in (release.get("source") or {}).items())
        bases = release["bases"] if args.all else proven
        said = f"\twhole cloud on {', '.join(proven)}" if proven else "\tnot the whole cloud"
        print(f"{name}\t{release['series']}\t{'/'.join(types)}\tdebian {', '.join(bases)}\t{versions}"
              f"{said if args.all else ''}")


def cmd_settings(args):
    """Every setting globals.yml may hold, its default and the file that declares it
    (a service's own settings are in its folder); with the operator's value where
    globals.yml sets one."""
    from ..declaration.settings import declared_settings
    defaults, origin = declared_settings()
    path = Path(args.config_dir) / "globals.yml"
    operator = (safeyaml.load(path.read_text()) if path.exists() else None) or {}
    for key, default in defaults.items():
        shown = json.dumps(default)
        if key in operator and operator[key] != default:
            shown += f" (globals.yml: {json.dumps(operator[key])})"
        print(f"{key}: {shown}\t{Path(origin[key]).relative_to(paths.REPO)}")


def cmd_build(args):
    from ..declaration.settings import settings_for_release
    from ..images.build import Builder, image_ref
    settings = _settings(args)
    if args.release:
        _release(args.release)
        settings = settings_for_release(settings, args.release)
    if args.push and not settings.get("docker_registry"):
        raise ValidationError([f"{Path(args.config_dir) / 'globals.yml'}: docker_registry: not set; "
                               f"--push needs the registry (host:port) images are pushed to"])
    if not args.images and not args.all:
        from ..declaration.roles import service_images
        args.images = service_images(settings)
        print(f"[build] the images of the enabled services: {', '.join(args.images)} (--all: every image)")
    builder = Builder(_client(), settings, out=lambda m: print(m, flush=True))
    result = builder.build(args.images or None, force=args.force)
    counts = {outcome: sum(1 for r in result.values() if r == outcome) for outcome in ("built", "tagged", "unchanged")}
    print("[build] done: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))
    if args.push:
        _push([image_ref(settings, name) for name in args.images or sorted(result)], builder.client, settings,
              args.road.netns)


def _push(refs, client, settings, netns):
    """Pushes three images at a time: each push mostly reads its image out of the
    engine and compresses its layers, one core's work (8 images here: 36 s one at a time,
    26 s). An image the registry holds already is not read out again."""
    from concurrent.futures import ThreadPoolExecutor, as_completed
    from ..images.build import push

    def timed(ref):
        begun = time.monotonic()
        copied = push(ref, client.images.get(ref).id, insecure=settings["docker_registry_insecure"], netns=netns)
        return copied, time.monotonic() - begun
    started, held = time.monotonic(), 0
    with ThreadPoolExecutor(3) as pool:
        pushes = {pool.submit(timed, ref): ref for ref in refs}
        for index, done in enumerate(as_completed(pushes), 1):
            copied, seconds = done.result()
            held += not copied
            print(f"[build] ({index}/{len(refs)}) " + (f"pushed {pushes[done]} ({seconds:.1f} s)" if copied else
                                                       f"{pushes[done]}: in the registry already"), flush=True)
    print(f"[build] pushed {len(refs) - held} image(s) to {settings['docker_registry']} ({held} there already) in "
          f"{time.monotonic() - started:.1f} s")


def cmd_init_runonce(args):
    """What the deployed cloud needs before its first server (kolla_salt.operations.runonce)."""
    import ipaddress
    from ..images.build import Builder, image_ref
    import shlex
    from ..operations.clouds import clouds_file_problem
    from ..operations.runonce import client_command, init_runonce, openstack
    args.road.clients_here()
    problems = []
    try:
        ipaddress.ip_network(args.cidr)
    except ValueError as error:
        problems.append(f"--cidr: {error}")
    public_key = None
    if args.public_key:
        try:
            public_key = Path(args.public_key).read_text()
        except OSError as error:
            problems.append(f"--public-key: {args.public_key}: {error.strerror}")
    clouds_problem = clouds_file_problem(args.config_dir)
    if clouds_problem:
        problems.append(clouds_problem)
    if problems:
        raise ValidationError(problems)
    settings, client = _settings(args), _client()
    image = image_ref(settings, "guest")
    print(f"[init-runonce] the guest's image {image} (built if it is not)", flush=True)
    Builder(client, settings, out=lambda m: print(m, flush=True)).build(["guest"])
    server_create = init_runonce(lambda *a, values=True: openstack(args.config_dir, *a, values=values), client,
                                 image, args.prefix, args.cidr, public_key,
                                 Path(args.config_dir) / f"{args.prefix}key.pem", out=lambda m: print(m, flush=True))
    environment, argv = client_command(args.config_dir, *server_create)
    print("Boot a server:  " + " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items()) + " "
          + shlex.join(argv))


def cmd_compute(args):
    """A compute host emptied of its servers, or taking them again (kolla_salt.operations.compute;
    through a master, the orchestration kolla.compute)."""
    if args.timeout <= 0:
        raise ValidationError([f"--timeout: {args.timeout}: must be a positive number of seconds"])
    args.road.compute(args.action, args.host, args.timeout)


def cmd_lab(args):
    """The lab of hosts on one machine (kolla_salt.lab.namespaces)."""
    from ..lab.namespaces import Lab
    lab = Lab(args.name, args.hosts, out=lambda m: print(m, flush=True))
    if args.action == "up":
        described = lab.up()
        print(json.dumps(described, indent=2) if args.format == "json" else "[lab] hosts: " + ", ".join(
            f"{h['name']} {h['address']} (DOCKER_HOST={h['docker_host']})" for h in described["hosts"]))
    elif args.action == "down":
        lab.down()
    else:
        answering = lab.ping()
        for host in lab.describe()["hosts"]:
            print(f"{host['name']}\t{host['address']}\t{'answers' if host['name'] in answering else 'not answering'}")
    return 0
