"""Running the checkout's states masterless: `salt-call --local` with a
minion config generated under the state folder (no /etc/salt needed, nothing
else on the host is touched)."""
import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from .. import paths
from ..errors import KollaError, ValidationError
from ..private import redact
from .road import Road
from .statereturns import refused, services_run

LOG_DIR = Path("/var/log/kolla-salt")


def minion_config(config_dir, state_dir, minion_id=None):
    """Writes <state_dir>/salt/minion and returns the folder (salt-call -c)."""
    root = Path(state_dir) / "salt"
    opts = {
        "id": minion_id or socket.gethostname(),
        "file_client": "local",
        "master_type": "disable",
        "file_roots": {"base": [str(paths.STATES_DIR), str(paths.REPO / "salt")]},
        "pillar_roots": {"base": [str(paths.PILLAR_DIR)]},
        "module_dirs": [str(paths.REPO / "salt" / "_modules")],
        "states_dirs": [str(paths.REPO / "salt" / "_states")],
        "grains_dirs": [str(paths.REPO / "salt" / "_grains")],
        "kolla_config_dir": str(config_dir),
        "root_dir": str(root),
        "cachedir": str(root / "cache"),
        "pki_dir": str(root / "pki"),
        "sock_dir": str(root / "sock"),
        "pidfile": str(root / "minion.pid"),
        "log_file": str(LOG_DIR / "salt-minion.log"),
        "log_level_logfile": "warning",
        "state_output": "changes",
        "failhard": True,
    }
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (root / "minion").write_text(yaml.safe_dump(opts))
    return root


def salt_call(config_dir, state_dir, args, secrets=(), said=None):
    """Runs salt-call --local; returns (exit code, parsed JSON return).

    Progress lines the modules print go straight to the terminal (stderr), or, given
    a list `said`, into it (its lines, redacted)."""
    conf = minion_config(config_dir, state_dir)
    exe = Path(sys.executable).parent / "salt-call"
    cmd = [str(exe), "--local", "-c", str(conf), "--out=json", "--retcode-passthrough", "-l", "quiet", *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None if said is None else subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if said is not None:
        said.extend(redact(proc.stderr, secrets).splitlines())
    out = redact(proc.stdout, secrets)
    try:
        data = json.loads(out).get("local") if out.strip() else None
    except json.JSONDecodeError:
        data = out
    return proc.returncode, data


class Here(Road):
    """This host as a master of one: the execution functions a master calls on its
    minions (kolla_container's), called here with salt-call --local, the pillar
    compiled by Salt as on a minion, every answer keyed None (no host to name). The
    operator's files are read when needed: a command that asks this host nothing
    (validate, genpwd) must not need them valid, and one that declares (an upgrade)
    goes on with its new declaration."""

    def __init__(self, config_dir):
        self.config_dir = config_dir
        self._settings_read = None   # (globals.yml's text, the settings read from it)

    @property
    def settings(self):
        """The operator's settings, read again only when globals.yml changed (a command
        may declare anew, `rollback --release`, before it converges): each reading
        composes every folder's settings, a sixth of a second."""
        from ..declaration.settings import load_settings
        try:   # its text, not its time: two writes within a clock tick look alike
            version = (Path(self.config_dir) / "globals.yml").read_bytes()
        except OSError:
            version = None
        if self._settings_read is None or self._settings_read[0] != version:
            self._settings_read = (version, load_settings(self.config_dir))
        return self._settings_read[1]

    @functools.cached_property
    def secrets(self):
        from ..declaration.settings import load_passwords
        return list(load_passwords(self.config_dir).values())

    @property
    def state_dir(self):
        return self.settings["kolla_state_directory"]

    def operator_folder(self):
        return self.config_dir

    def ask_all(self, function, *args, timeout=None):
        """{None: FUNCTION's return}; a failure raises, what Salt said of it on stderr."""
        code, data = salt_call(self.config_dir, self.state_dir, [function, *map(str, args)], self.secrets)
        if code:
            raise KollaError(f"{function} failed on this host (salt-call said why above)")
        return {None: data}

    def returns(self, target, function, *args, timeout=None):
        """{None: FUNCTION's return}, or what it refused as a minion says it to a
        master ("ERROR: why"): the caller reads both roads' answers alike."""
        said = []
        code, data = salt_call(self.config_dir, self.state_dir, [function, *map(str, args)], self.secrets, said)
        if code:
            why = "\n".join(said).strip().removeprefix(f"Error running '{function}': ")
            return {None: f"ERROR: {why or f'salt-call {function} exited with {code}'}"}
        return {None: data}

    def sync_modules(self):
        """Nothing to sync: salt-call runs the checkout's modules."""

    def interfaces(self):
        from ..declaration.hostfacts import local_interfaces
        return {None: local_interfaces()}

    def container(self, name, command):
        return None, name

    def preflight(self, declared=False):
        """{None: this host's kolla_container.facts}: its checks are its run's first states."""
        return self.ask_all("kolla_container.facts")

    def declared(self, hosts=None):
        from ..declaration.pins import load_pins
        from ..declaration.roles import declared_services
        return {None: {"services": declared_services(self.settings, load_pins(self.config_dir),
                                                      socket.gethostname())}}

    def declaration(self, facts=None, warnings=None):
        return {None: {"services": self.validate(warnings)["kolla"]["services"]}}

    def validate(self, warnings=None):
        """This host's pillar, built here (returned)."""
        from ..declaration.inventory import build_pillar
        return build_pillar(self.config_dir, minion_id=socket.gethostname(), warnings=warnings)

    def check_images(self, hosts):
        """The images are built on this host: one missing is refused."""
        import docker

        from ..declaration.preflight import missing_images
        missing = missing_images(docker.from_env(timeout=600), hosts[None]["services"])
        if missing:
            raise ValidationError(missing)

    def deploying(self, names):
        """No facts, no declaration: the deploy's salt-call compiles the pillar once and
        its first states check the names."""
        return None, {}, names

    def upgrade_checks(self, old, names, allow_jump, release):
        """The new declaration's `names` on this host; a release jump is refused here,
        before their images are built (an allowed one the deploy that follows says)."""
        import docker

        from ..declaration.preflight import check_release_paths
        from ..declaration.releases import running_releases
        new = [s for s in self.declared()[None]["services"] if s["name"] in names]
        if not allow_jump:
            check_release_paths({None: (new, running_releases(docker.from_env(timeout=600)))}, False)
        return {}, {}, new

    def prepare_images(self, settings, services):
        """The images of `services` (declared_services' entries) that their releases and bases need
        (kolla_salt.images.build), built on this host."""
        import docker

        from ..declaration.inventory import service_specs
        from ..declaration.settings import settings_for_release
        from ..images.build import Builder, base_version, image_folder
        print("[upgrade] " + ", ".join(f"{s['name']} to {s['release']} on {s['base']}" for s in services), flush=True)
        for release, base in sorted({(s["release"], s["base"]) for s in services}):
            images = sorted({image_folder(spec["image"]) for s in services if (s["release"], s["base"]) == (release, base)
                             for spec in service_specs(s)})
            Builder(docker.from_env(timeout=600), settings_for_release(settings, release, base_version(base)),
                    out=lambda m: print(m, flush=True)).build(images)

    def redeclared(self, facts, hosts, allow_jump):
        """As given: the deploy's first states check the pillar and judge the releases."""
        return hosts

    def follow_logs(self, host, name, tail, ask):
        """Streamed from this host's engine (polling through salt-call would cost a
        second of CPU a call), the passwords redacted line by line as
        kolla_container.logs does."""
        import docker

        from ..containers.manager import ContainerManager
        from ..containers.spec import named
        from ..private import redacted_lines
        settings = self.settings
        container = named(name, settings["container_name_prefix"],
                          ContainerManager.from_settings(settings, client=docker.from_env(timeout=600)).get)[1]
        if container is None:
            raise KollaError(f"logs: no container named {name}")
        for line in redacted_lines(container.logs(stream=True, follow=True, tail=tail if tail is not None else "all"),
                                   self.secrets):
            sys.stdout.write(line)
            sys.stdout.flush()
        return 0

    def database_members(self, facts=None):
        """([None], no target) when this host runs the database."""
        from ..declaration.settings import database_service
        name = database_service()
        if not self.settings[f"enable_{name}"]:
            raise ValidationError([f"{self.config_dir}/globals.yml: {name} is not deployed on this host "
                                   f"(enable_{name})"])
        return [None], None

    def galera_recovery(self):
        raise ValidationError(["mariadb-recovery: Galera runs on several hosts; give --master DIR or --lab NAME"])

    def compute(self, action, host, timeout):
        """Against the cloud's APIs from here, as its admin (clouds.yaml), saying each step as it goes."""
        from ..operations.compute import Compute, connect
        compute = Compute(connect(self.config_dir), out=lambda line: print(line, flush=True))
        if action == "drain":
            compute.drain(host, timeout=timeout)
        else:
            compute.undrain(host)

    def secrets_folder(self, name):
        """Beside the backup."""
        from ..operations.backup import backup_directory
        return backup_directory(self.settings) / name

    def backup(self, why, incremental=False, target=None):
        """A backup of this host's database (kolla_backup.take_here; no `target`: the
        database is here): its manifest, the progress on salt-call's stderr."""
        return self.ask_all("kolla_backup.take_here", json.dumps(why), incremental)[None]

    def converge(self, command, pillar, test=False, hosts=None, facts=None, predict=False):
        """`command` (deploy; an upgrade is one too, its pillar
        kolla_backup_before_migrations backing the database up within the run, and a
        restore, its pillar kolla_restore putting a backup back before the services
        start; with pillar kolla_rotate_keys the keys of `kolla_services` are rotated
        first, kolla_salt.operations.keys.rotate) on this host: salt-call --local
        state.apply kolla.deploy with `pillar`, the pillar compiled once, by Salt; the health loop's restarts paused meanwhile (it must
        not restart a container being swapped in). Refused before anything changed as
        its first states say (statereturns.refused). (ok, [the one step: {"hosts":
        {None: its states}}]); `hosts` gets what the run deployed. `facts`,
        `predict`: a master's (one state run is its own prediction here)."""
        from ..healing.healthloop import ledger
        names = pillar.get("kolla_services") or []
        if pillar.get("kolla_rotate_keys") and not test:   # before Salt compiles the pillar that writes them
            from ..operations import keys
            for line in keys.rotate(self.config_dir, self.settings["container_name_prefix"],
                                    dict.fromkeys(names, [None]),
                                    lambda hosts, volume: self.ask_all("kolla_keys.digest", volume)):
                print(f"[{command}] {line}", flush=True)
        print(f"[{command}] {'checking' if test else 'deploying'} "
              f"{', '.join(names) or 'every service declared for this host'} "
              f"(salt-call --local state.apply kolla.deploy)", flush=True)
        # Every password of passwords.yml is hidden from what is printed, not only those
        # this host's pillar holds (the ones its services use).
        with contextlib.nullcontext() if test else ledger(self.settings).paused_restarts():
            code, states = salt_call(self.config_dir, self.state_dir,
                                     ["state.apply", "kolla.deploy", f"pillar={json.dumps(pillar)}",
                                      *(["test=True"] if test else [])], self.secrets)
        refused({None: states})
        if hosts is not None:
            hosts[None] = {"services": services_run(states)}
        return code == 0, [{"hosts": {None: states}}]

    def settle(self, command, hosts=None):
        """After containers changed (whatever the outcome: a failed upgrade leaves the
        restored containers to watch): this host's health loop watches them, or is
        stopped when it has nothing to do, as the declaration says now (a release
        rollback declares after this road was made). `hosts`: a master's."""
        from ..healing import healthloop
        settings = self.settings
        schedule = healthloop.backup_schedule(settings, self.config_dir)
        if not settings["enable_health_loop"] and not schedule:
            if healthloop.stop_health_daemon(settings):
                print(f"[{command}] health loop: stopped (enable_health_loop is false)")
            return
        daemon = healthloop.ensure_health_daemon(settings, config_dir=self.config_dir)
        print(f"[{command}] health loop: {'started' if daemon['started'] else 'running'} (pid {daemon['pid']}, "
              + (f"check every {settings['health_check_interval']} s, restart after "
                 f"{settings['health_failure_threshold']} failures" if settings["enable_health_loop"]
                 else "no checks: enable_health_loop is false")
              + (f"; a database backup when the newest is {settings['mariadb_backup_interval_minutes']} minutes "
                 f"old, {settings['mariadb_backups_kept']} scheduled ones kept" if schedule else "")
              + f"; log {healthloop.daemon_root(settings) / 'minion.log'})", flush=True)
