"""The one road every command takes to the hosts, whether they are one (saltcall.Here)
or many (master.Master): the CLI is written once against these methods and never asks
which road it has (tests/unit/test_one_road.py holds it to that). Answers are keyed by
host; one host is a master of one, keyed None (no host to name). Where a step has
nothing to do on one host (its salt-call run checks and declares itself), Here says
so with an empty answer rather than the CLI skipping the call."""
import ctypes
import os
from abc import ABC, abstractmethod

from ..errors import KollaError

CLONE_NEWNET = 0x40000000


class Road(ABC):
    # The network namespace the road's clients run in (the lab's switch), or None.
    netns = None

    def clients_here(self):
        """Moves this process into `netns`, where the road's clients reach the cloud, so
        the cloud's client commands (init-runonce, compute) run through a master as
        on a host: with the operator folder's clouds.yaml. Before any thread starts (a
        namespace is a thread's), and for good: the command ends in it."""
        if self.netns:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/run/netns/{self.netns}") as namespace:
                if libc.setns(namespace.fileno(), CLONE_NEWNET) != 0:
                    raise KollaError(f"network namespace {self.netns}: {os.strerror(ctypes.get_errno())}")

    @abstractmethod
    def operator_folder(self):
        """The operator's folder (globals.yml, passwords.yml) the hosts' pillars read."""

    @abstractmethod
    def ask_all(self, function, *args, timeout=None):
        """{host: FUNCTION's return} of every host."""

    @abstractmethod
    def returns(self, target, function, *args, timeout=None):
        """{host: FUNCTION's return} of the hosts `target` names that answered."""

    @abstractmethod
    def sync_modules(self):
        """The hosts run the checkout's Salt modules before they are asked."""

    @abstractmethod
    def interfaces(self):
        """{host: its network interfaces, None when it does not answer}."""

    @abstractmethod
    def container(self, name, command):
        """(host, container) that `name` (HOST:CONTAINER through a master) names."""

    @abstractmethod
    def preflight(self, declared=False):
        """{host: its kolla_container.facts} once the hosts are fit for a change."""

    @abstractmethod
    def declared(self, hosts=None):
        """{host: {"services": ...}} the declaration places, no pillar compiled."""

    @abstractmethod
    def declaration(self, facts=None, warnings=None):
        """{host: {"services": ...}} of each host's compiled pillar (refused when one
        does not compile); `warnings` gets the pillar's warnings where it is built here."""

    @abstractmethod
    def validate(self):
        """Refuses a declaration the hosts could not take (raises ValidationError)."""

    @abstractmethod
    def check_images(self, hosts):
        """Refuses when an image the declaration `hosts` runs is not where it is needed."""

    @abstractmethod
    def deploying(self, names):
        """(facts, hosts, names) a deploy of the services `names` (all when empty) starts from."""

    @abstractmethod
    def upgrade_checks(self, old, names, allow_jump, release):
        """(facts, hosts, services built here) of an upgrade of `names`, its release
        paths judged, once the new declaration is written (`old`: the one before)."""

    @abstractmethod
    def prepare_images(self, settings, services):
        """The images an upgrade of `services` needs, where the hosts take them from."""

    @abstractmethod
    def redeclared(self, facts, hosts, allow_jump):
        """The declaration `hosts` (asked when empty) a deploy after a restore walks,
        release jumps judged with `allow_jump`."""

    @abstractmethod
    def converge(self, command, pillar, test=False, hosts=None, facts=None, predict=False):
        """(ok, steps) of a deploy, an upgrade, a restore and the deploy after it (pillar
        kolla_restore), or a rotation of keys and the deploy after it (pillar
        kolla_rotate_keys); `hosts` gets what was declared."""

    @abstractmethod
    def settle(self, command, hosts=None):
        """After containers changed: the hosts keep what they now run."""

    @abstractmethod
    def follow_logs(self, host, name, tail, ask):
        """Prints container `name`'s new lines until it stops; `ask(since)` prints
        kolla_container.logs after `since` and returns its answer."""

    @abstractmethod
    def database_members(self, facts=None):
        """(the hosts of the database, its placement target); refused when it runs nowhere."""

    @abstractmethod
    def galera_recovery(self):
        """(members, ok, the runner's return) of kolla_galera.recover."""

    @abstractmethod
    def backup(self, why, incremental, target):
        """The manifest of a new backup of the database."""

    @abstractmethod
    def compute(self, action, host, timeout):
        """A compute host drained of its servers or undrained (kolla_salt.operations.compute)."""

    @abstractmethod
    def secrets_folder(self, name):
        """Where the secrets backup `name`'s data needs are kept."""
