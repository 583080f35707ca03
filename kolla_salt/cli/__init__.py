"""kolla-salt: build images, deploy, reconfigure, upgrade and roll back
containerized OpenStack with Salt. Every subcommand has --help."""
import argparse
import os
import sys

from .. import paths
from ..errors import KollaError, ValidationError
from ..roads.master import FOLLOW_PAUSE
from .converge import cmd_deploy, cmd_rotate_keys, cmd_upgrade
from .database import cmd_mariadb_backup, cmd_mariadb_recovery, cmd_mariadb_restore
from .operate import cmd_destroy, cmd_history, cmd_logs, cmd_rollback, cmd_status, cmd_stop, cmd_unpin
from .prepare import cmd_build, cmd_certificates, cmd_compute, cmd_genpwd, cmd_init_runonce, cmd_lab, cmd_releases
from .prepare import cmd_settings, cmd_validate

# The commands by concern: prepare (operator files, images, the first server, the lab),
# converge (deploy, upgrade), operate (status, logs, rollback, stop, destroy), database
# (backups, restores, recovery, the release rollback); what they share is in common and
# declaring (the declared state). This module parses the command line.
EXIT_INVALID = 2


def build_parser():
    parser = argparse.ArgumentParser(prog="kolla-salt", description=__doc__)
    parser.add_argument("--config-dir", default=str(paths.config_dir()),
                        help="operator folder with globals.yml, passwords.yml, config/ "
                             "(default: $KOLLA_SALT_CONFIG_DIR or /etc/kolla-salt)")
    through = parser.add_mutually_exclusive_group()
    through.add_argument("--master", metavar="DIR", dest="master_dir",
                         help="act on every host through the salt-master whose config folder is DIR "
                              f"({', '.join(THROUGH_MASTER)}; logs and rollback take HOST:CONTAINER); "
                              "the operator folder is its kolla_config_dir")
    through.add_argument("--lab", metavar="NAME", help="the same through the master of the lab NAME (`kolla-salt lab`)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_release_jump(p):
        p.add_argument("--allow-release-jump", action="store_true",
                       help="allow a release change outside OpenStack's upgrade paths (N -> N+1, SLURP)")

    def add(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = add("build", cmd_build, "build images (parents first; unchanged images are not rebuilt)")
    p.add_argument("images", nargs="*", help="image folders under images/ (default: those the services enabled "
                                             "in globals.yml run, and their parents)")
    p.add_argument("--all", action="store_true", help="every image folder (a guest image too)")
    p.add_argument("--release", help="build this release's images (see `kolla-salt releases`)")
    p.add_argument("--force", action="store_true", help="rebuild even if unchanged")
    p.add_argument("--push", action="store_true", help="then push them to docker_registry (globals.yml), from "
                   "which hosts pull; with --master/--lab, that folder's globals.yml")
    p = add("deploy", cmd_deploy, "deploy or reconfigure the services of this host (salt-call --local)")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--test", action="store_true", help="show what would change; change nothing")
    add_release_jump(p)
    p = add("reconfigure", cmd_deploy, "same as deploy: re-render config, restart what changed")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--test", action="store_true", help="show what would change; change nothing")
    add_release_jump(p)
    p = add("upgrade", cmd_upgrade, "upgrade in container-set tree order; a failed container "
                                    "is rolled back to its previous generation and the run stops")
    p.add_argument("--services", help="comma-separated services (default: all enabled)")
    p.add_argument("--set", help="only the services of this set (top-level set or service name)")
    p.add_argument("--release", help="the release to upgrade to (globals.yml; with --services or --set, "
                                     "pins.yml for those services)")
    p.add_argument("--base", help="move the whole cloud to this base (kolla_base_distro_version in globals.yml; "
                                  "a service whose folder says it cannot cross by a swap is held on its base "
                                  "in pins.yml)")
    p.add_argument("--batch", type=int, default=1, help="through a master: hosts upgraded at a time (default 1)")
    add_release_jump(p)
    add("validate", cmd_validate, "check globals.yml, passwords.yml and config overrides")
    p = add("certificates", cmd_certificates, "make a private CA and the certificate of each endpoint TLS is on "
            "for (certificates/haproxy.pem, haproxy-internal.pem, backend-cert.pem and backend-key.pem, and "
            "ca/root.crt in the operator folder, mode 0600; a valid one is kept)")
    p.add_argument("--days", type=int, default=365, help="how long the certificates are valid (default 365)")
    p.add_argument("--renew", action="store_true", help="make new certificates even if the current ones are valid")
    add("genpwd", cmd_genpwd, "fill missing passwords in passwords.yml and make missing key repositories "
                              "(keys/; keeps existing ones)")
    add("rotate-keys", cmd_rotate_keys, "rotate keystone's fernet keys (keys/keystone/fernet) once every host "
                                        "holds the current ones, then deploy them to every keystone host")
    p = add("releases", cmd_releases, "list the OpenStack releases whose whole cloud kolla-salt's tests prove, "
                                      "oldest first, with the Debian bases it is proven on")
    p.add_argument("--all", action="store_true", help="every release kolla-salt can build, the bases it builds on "
                                                      "(the default first) and what is proven of it")
    add("settings", cmd_settings, "list every setting of globals.yml with its default, the file that "
                                  "declares it and the operator's value")
    p = add("status", cmd_status, "show the container-set tree with state, health, image, generation")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p = add("logs", cmd_logs, "show a container's logs (service log files: <kolla_log_directory>/<service>/)")
    p.add_argument("container", help="container name, with or without container_name_prefix; through a master "
                                     "HOST:CONTAINER")
    p.add_argument("-f", "--follow", action="store_true",
                   help=f"keep printing new lines until the container stops or Ctrl-C (through a master: "
                        f"asked for every {FOLLOW_PAUSE} s)")
    p.add_argument("--tail", type=int, help="only the last N lines")
    p = add("history", cmd_history, "list a container's generations: outcome, time, image, config hash")
    p.add_argument("container", help="container name, with or without container_name_prefix")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p = add("rollback", cmd_rollback, "return a container or a set to its last known good generation")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("container", nargs="?", help="container name, with or without container_name_prefix")
    group.add_argument("--set", help="a set name or path (containers roll back in reverse order)")
    group.add_argument("--release", help="after an upgrade from RELEASE: the database as the backup the upgrade "
                                         "took holds it, and every container at RELEASE (asks first)")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="with --release: do not ask")
    p = add("unpin", cmd_unpin, "remove pins (pins.yml) so services and containers follow globals.yml "
                                "again at the next deploy")
    p.add_argument("names", nargs="+", metavar="NAME", help="a service (its release pin and its containers held "
                                                            "on any host) or a container (with or without the prefix; "
                                                            "HOST:CONTAINER for one held through a master)")
    p = add("stop", cmd_stop, "stop running containers (default: all managed ones; through a master, on every "
                              "host); `deploy` starts them again")
    p.add_argument("--services", help="comma-separated services")
    p = add("destroy", cmd_destroy, "remove all managed containers, through a master on every host (asks "
                                    "first; keeps volumes)")
    p.add_argument("--remove-volumes", action="store_true", help="also remove named volumes and their data")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="do not ask")
    p = add("init-runonce", cmd_init_runonce, "make the deployed cloud ready for its first server: the project's "
            "guest image, a flavor, a network with a subnet and a router, a keypair (what exists is kept)")
    p.add_argument("--prefix", default="demo-", help="the start of every name it gives (default demo-)")
    p.add_argument("--cidr", default="10.0.0.0/24", help="the subnet's range (default 10.0.0.0/24)")
    p.add_argument("--public-key", metavar="FILE", help="the keypair's public key (default: a new keypair, "
                                                       "its private key in the operator folder as PREFIXkey.pem)")
    p = add("compute", cmd_compute, "drain: disable a compute host in nova and live-migrate its servers to the "
            "others (refused, naming them, when they do not fit there); undrain: let nova schedule there again")
    p.add_argument("action", choices=("drain", "undrain"))
    p.add_argument("host", metavar="HOST", help="the compute host (its nova-compute's host name: the minion id)")
    p.add_argument("--timeout", type=float, default=600, help="drain: seconds to wait for the servers to move "
                                                              "(default 600)")
    p = add("mariadb-backup", cmd_mariadb_backup, "back up the database with mariabackup while it serves "
            "(kept in mariadb_backup_directory with a manifest and the secrets its data needs; through a master: "
            "of the last Synced Galera member, desynced meanwhile)")
    p.add_argument("--list", action="store_true", help="list the backups kept, oldest first")
    p.add_argument("--incremental", action="store_true", help="only what changed since the newest full backup "
                   "(a restore applies both)")
    p = add("mariadb-restore", cmd_mariadb_restore, "put the database back as a backup holds it (asks first; "
            "a backup of the data it replaces is taken first; through a master: the Galera cluster is founded "
            "again from the member holding it)")
    p.add_argument("backup", metavar="BACKUP", help="the backup's name (`kolla-salt mariadb-backup --list`)")
    p.add_argument("--yes-i-really-mean-it", action="store_true", help="do not ask")
    add("mariadb-recovery", cmd_mariadb_recovery, "after every Galera member stopped: bootstrap from the member "
        "with the highest committed position and rejoin the others one at a time (through a master)")
    p = add("lab", cmd_lab, "a lab of hosts on one machine: network namespaces with their own Docker "
                            "engines and salt-minions, a salt-master and a registry (a test bed)")
    p.add_argument("action", choices=("up", "down", "status"),
                   help="up: make or repair it; down: remove all it made; status: which minions answer "
                        "(images reach its registry with `kolla-salt --lab NAME build --push`)")
    p.add_argument("--hosts", type=int, default=3, help="how many hosts (lab/topology.yml lists them; default 3)")
    p.add_argument("--name", default="kslab", help="the lab's name, the prefix of all it makes (default kslab; "
                                                   "6 characters at most: its hosts' socket paths must fit)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return parser


THROUGH_MASTER = ("build", "deploy", "reconfigure", "upgrade", "status", "logs", "rollback", "unpin", "stop",
                  "destroy", "mariadb-recovery", "mariadb-backup", "mariadb-restore", "rotate-keys", "certificates",
                  "init-runonce", "compute")


def _choose_road(args):
    """The one place the road is chosen: args.road is a Master for --master DIR / --lab
    NAME, else this host as a master of one (Here); the operator folder is the road's.
    Every command then goes by args.road alone (kolla_salt.roads.road.Road)."""
    from ..lab.namespaces import Lab
    from ..roads.master import Master
    from ..roads.saltcall import Here
    if (args.master_dir or args.lab) and args.command not in THROUGH_MASTER:
        raise ValidationError([f"{'--master' if args.master_dir else '--lab'}: `{args.command}` runs on a host "
                               f"itself (through a master: {', '.join(THROUGH_MASTER)})"])
    args.road = (Master(args.master_dir) if args.master_dir else Lab(args.lab).master() if args.lab
                 else Here(args.config_dir))
    args.config_dir = str(args.road.operator_folder())


class _QuietWhenClosed:
    """stdout that goes quiet when its reader leaves (`kolla-salt status | head`): the
    command finishes its work (a deploy half-done because of a pipe helps nobody) and
    exits without a BrokenPipeError traceback."""

    def __init__(self, stream):
        self.stream = stream

    def _guard(self, action, *args):
        try:
            return action(*args)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            return None

    def write(self, text):
        self._guard(self.stream.write, text)
        return len(text)

    def flush(self):
        self._guard(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main(argv=None):
    sys.stdout = _QuietWhenClosed(sys.stdout)
    args = build_parser().parse_args(argv)
    try:
        _choose_road(args)
        return args.func(args) or 0
    except ValidationError as error:
        print("error: invalid input, nothing was changed:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return EXIT_INVALID
    except KollaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
