"""Running the health loop on an all-in-one host: a masterless salt-minion
daemon with the `kolla_health` beacon and its own reactor engine.

Why masterless and not a local salt-master + minion: the all-in-one host
already deploys masterless (`salt-call --local`), and a master would add a
second daemon, key acceptance and two open TCP ports (4505/4506) only to
carry an event from a process to itself. Salt 3008.3 runs the reactor as an
engine inside a minion (`engines: [reactor]`, `master_type: disable`): it
listens on the minion's own event bus, where a masterless minion leaves its
beacon events as one `__beacons_return` event, and runs `caller.<function>`
reactions in-process (salt/utils/reactor.py, ReactWrap.caller). The reaction,
salt/reactor/kolla_health/masterless.sls, calls `kolla_health.restart`.
Multinode setups use the same beacon and module with a master's reactor
(salt/reactor/kolla_health/master.sls).

Everything the daemon has lives under <kolla_state_directory>/salt/health/
(config, pid files, keys, cache, log `minion.log`, sockets unless that path
is too long for a Unix socket), the restart bookkeeping in
<kolla_state_directory>/health/restarts.json; it watches only containers
whose names start with `container_name_prefix`, and `stop_health_daemon`
ends only the process `ensure_health_daemon` started (recorded in its pid
file and checked against its command line): nothing else on the host is
touched, so tests and a real deployment can each run one side by side.

`EventTap` follows the daemon's event bus (tests, benchmarks, operators).

Settings: the health_* keys and enable_health_loop of globals.yml (defaults
in pillar/defaults/globals.yml).
"""
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from .. import paths

# Unix socket paths must stay under 108 bytes; the minion's is <sock_dir>/minion_event_<10 hex>_pub.ipc.
_SOCKET_ROOM = 107 - len("/minion_event_0123456789_pub.ipc")


def daemon_root(settings):
    return Path(settings["kolla_state_directory"]) / "salt" / "health"


def _sock_dir(root):
    wanted = root / "sock"
    if len(str(wanted)) <= _SOCKET_ROOM:
        return wanted
    # A deep state folder: keep the sockets in a short, per-state-folder place.
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"kolla-health-{digest}"


def code_files():
    """The loop's code: the library (whatever health.py imports, now or later; the
    command line's package aside) and its Salt adapters."""
    library = paths.REPO / "kolla_salt"
    return sorted(p for p in library.rglob("*.py") if p.relative_to(library).parts[0] != "cli") + [
        paths.REPO / "salt" / "_beacons" / "kolla_health.py", paths.REPO / "salt" / "_modules" / "kolla_health.py",
        paths.REPO / "salt" / "_modules" / "kolla_backup.py",
        paths.REPO / "salt" / "reactor" / "kolla_health" / "masterless.sls"]


def code_version():
    """Hash of the loop's code: part of the daemon's config, so that a deploy of
    changed code restarts the daemon (it loads its modules once)."""
    digest = hashlib.sha256()
    for path in code_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def ledger(settings):
    """The restart bookkeeping (and pause switch) of this host's loop."""
    from .health import RestartLedger
    return RestartLedger(Path(settings["kolla_state_directory"]) / "health" / "restarts.json")


def status_file(settings):
    """Where the beacon writes what it knows of each container (`kolla-salt status`)."""
    return Path(settings["kolla_state_directory"]) / "health" / "status.json"


def beacon_config(settings):
    """The kolla_health beacon's configuration (Salt's list of one-key dicts).
    It runs every second (Salt's `interval`); the checks keep their own pace."""
    return [
        {"interval": 1},
        {"check_interval": settings["health_check_interval"]},
        {"retry_interval": settings["health_retry_interval"]},
        {"threshold": settings["health_failure_threshold"]},
        {"probe": settings["health_stopped_probe"]},
        {"pressure_limit": settings["health_pressure_limit"]},
        {"slow_factor": settings["health_slow_timeout_factor"]},
        {"stall_window": settings["health_stall_window"]},
        {"prefix": settings["container_name_prefix"]},
        {"remind": settings["health_restart_backoff"]},
        {"remind_max": settings["health_restart_window"]},
        {"status_file": str(status_file(settings))},
        {"state_dir": settings["kolla_state_directory"]},
    ]


def restart_settings(settings):
    """The restart policy kolla_health.restart reads (minion option or pillar `kolla_health`)."""
    return {
        "state_file": ledger(settings).path,
        "restart_cap": settings["health_restart_cap"],
        "restart_window": settings["health_restart_window"],
        "restart_backoff": settings["health_restart_backoff"],
        "stop_timeout": settings["health_stop_timeout"],
        "prefix": settings["container_name_prefix"],
        "state_dir": settings["kolla_state_directory"],
    }


def minion_id():
    return f"{socket.gethostname()}-health"


def backup_schedule(settings, config_dir):
    """The Salt schedule of this host's scheduled database backups (globals.yml
    mariadb_backup_interval_minutes; kolla_backup.scheduled decides each minute whether
    one is due), or None. The daemon runs it beside (or without) the health loop."""
    if not (config_dir and settings["mariadb_backup_interval_minutes"] and settings["enable_mariadb"]):
        return None
    # return_job: False: no master to return to (the return fails and is logged as an error).
    return {"kolla-mariadb-backup": {"function": "kolla_backup.scheduled", "seconds": 60, "run_on_start": True,
                                     "maxrunning": 1, "return_job": False, "kwargs": {"config_dir": str(config_dir)}}}


def minion_opts(settings, config_dir=None):
    """The daemon's minion configuration, from the kolla settings (and the operator
    folder `config_dir`, which scheduled backups read)."""
    root = daemon_root(settings)
    schedule = backup_schedule(settings, config_dir)
    return {
        "id": minion_id(),
        "master_type": "disable",
        "file_client": "local",
        # Every path is given (root_dir "/" so Salt keeps them as they are, even a
        # socket folder outside `root`); nothing falls back to /etc/salt or /var.
        "root_dir": "/",
        "cachedir": str(root / "cache"),
        "extension_modules": str(root / "cache" / "extmods"),
        "pki_dir": str(root / "pki"),
        "sock_dir": str(_sock_dir(root)),
        "pidfile": str(root / "minion.pid"),
        "log_file": str(root / "minion.log"),
        "log_level_logfile": "info",
        "file_roots": {"base": [str(paths.REPO / "salt")]},
        "pillar_roots": {"base": [str(root / "pillar")]},   # empty: the loop needs no pillar
        "module_dirs": [str(paths.REPO / "salt" / "_modules")],
        "beacons_dirs": [str(paths.REPO / "salt" / "_beacons")],
        "grains_cache": True,
        "loop_interval": 1,
        "beacons": {"kolla_health": beacon_config(settings)} if settings["enable_health_loop"] else {},
        **({"schedule": schedule} if schedule else {}),
        "engines": [{"reactor": {}}],
        "reactor": [{"__beacons_return": [str(paths.REPO / "salt" / "reactor" / "kolla_health" / "masterless.sls")]}],
        "kolla_health": {"code_version": code_version(), **restart_settings(settings)},
    }


def running_pid(settings):
    """The pid of this host's health daemon, or None when it does not run."""
    return _running_pid(daemon_root(settings))


def _running_pid(root):
    """The daemon's pid if the process in our pid file is alive and is ours."""
    try:
        pid = int((root / "daemon.pid").read_text().strip())
        # Salt retitles its processes: the arguments may come back as one string.
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except (OSError, ValueError):
        return None
    return pid if b"salt-minion" in cmdline and f"-c {root} ".encode() in cmdline + b" " else None


def ensure_health_daemon(settings, timeout=60, config_dir=None):
    """Writes the daemon's config and starts it unless it already runs with that
    config (a changed config restarts it). Returns {pid, started, config}.
    Whether the loop should run at all (enable_health_loop, a backup schedule) is the
    caller's call."""
    root = daemon_root(settings)
    opts = minion_opts(settings, config_dir)
    text = yaml.safe_dump(opts, sort_keys=True)
    for folder in (root, root / "pillar", Path(opts["sock_dir"])):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    conf = root / "minion"
    pid = _running_pid(root)
    if pid and conf.exists() and conf.read_text() == text:
        return {"pid": pid, "started": False, "config": str(conf)}
    if pid:
        stop_health_daemon(settings)
    conf.write_text(text)
    # Salt persists the schedule into minion.d/_schedule.conf, which a start reads after
    # the config above and which would hide a schedule added since: the config decides.
    (root / "minion.d" / "_schedule.conf").unlink(missing_ok=True)
    _forget_pidfiles(root)
    exe = Path(sys.executable).parent / "salt-minion"
    with open(root / "daemon.out", "ab") as out:
        # Its own session: the daemon outlives the deploy that started it, and
        # a signal to the deploy's process group does not reach it.
        proc = subprocess.Popen([str(exe), "-c", str(root), "--disable-keepalive", "-l", "quiet"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    (root / "daemon.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while not Path(opts["pidfile"]).exists():   # the minion writes it once it is up
        if proc.poll() is not None:
            raise RuntimeError(f"the health loop daemon exited with code {proc.returncode}; "
                               f"see {root / 'daemon.out'} and {opts['log_file']}")
        if time.monotonic() > deadline:
            stop_health_daemon(settings)
            raise RuntimeError(f"the health loop daemon did not start within {timeout} s; see {opts['log_file']}")
        time.sleep(0.2)
    return {"pid": proc.pid, "started": True, "config": str(conf)}


def stop_health_daemon(settings, timeout=20):
    """Ends the daemon ensure_health_daemon started, with all of its session (the
    group it was started in), by SIGKILL. Returns its pid or None.

    Not SIGTERM: Salt's minion then sleeps a fixed 5 s "for final returns to the
    master" before it stops (salt/minion.py, MinionManager.stop_async), and this
    one has no master. Nothing is lost: its reactor ends a reaction in flight at
    SIGTERM too (os._exit), and its restart bookkeeping is written whole or not
    at all. The whole session goes: a job it ran (a restart) could otherwise
    outlive it and recreate a container after the caller removed it."""
    root = daemon_root(settings)
    pid = _running_pid(root)
    if pid is None:
        (root / "daemon.pid").unlink(missing_ok=True)
        return None
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    (root / "daemon.pid").unlink(missing_ok=True)
    _forget_pidfiles(root)
    return pid


def _forget_pidfiles(root):
    """Salt's own pid files of our (ended) daemon: a killed or not yet reaped
    minion leaves them, and a new one would then refuse to start."""
    for name in ("minion.pid", "process_responsibility_minion.pid"):
        (root / name).unlink(missing_ok=True)


def _alive(pid):
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)   # reaps it if we are its parent
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return ") Z " not in stat


class EventTap:
    """Records the daemon's event bus in a thread (tests, benchmarks, operators
    watching the loop). A masterless minion keeps its events local, its beacon
    events inside one `__beacons_return` event: they are unpacked here.
    `events` holds (monotonic time, tag, data)."""

    def __init__(self, settings):
        import threading

        import salt.config
        import salt.utils.event
        sock_dir = str(_sock_dir(daemon_root(settings)))
        listen_opts = salt.config.minion_config(None)
        listen_opts.update(sock_dir=sock_dir, id=minion_id())
        self.events = []
        self._stop = threading.Event()
        self._bus = salt.utils.event.get_event("minion", sock_dir=sock_dir, opts=listen_opts, listen=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            event = self._bus.get_event(wait=0.5, full=True)
            if not event:
                continue
            now = time.monotonic()
            if event["tag"] == "__beacons_return":
                self.events.extend((now, b["tag"], b["data"]) for b in event["data"].get("beacons", []))
            else:
                self.events.append((now, event["tag"], event["data"]))

    def tags(self, suffix, since=0.0):
        return [tag for at, tag, _ in self.events if tag.endswith(suffix) and at >= since]

    def first(self, suffix, since=0.0):
        """Monotonic time of the first event whose tag ends with `suffix`, or None."""
        return next((at for at, tag, _ in self.events if tag.endswith(suffix) and at >= since), None)

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._bus.destroy()
