"""Many hosts from one salt-master: what `kolla-salt --master DIR` (or `--lab NAME`)
runs instead of salt-call on the host itself.

The operator's folder is the master's `kolla_config_dir` (the pillar every minion
gets is built from it, pillar/kolla.sls). Before anything changes, `preflight`
checks what can be known: every accepted minion answers, its Docker engine
answers, the operator's files validate for every host (with that host's
interfaces) and every service is placed on at least one minion. Then the
container-set tree is walked across hosts by `salt-run state.orchestrate
kolla.deploy` (or kolla.upgrade, host by host): see salt/states/kolla/orchestrate.jinja.
"""
import hashlib
import json
import sys
from pathlib import Path

from .. import paths, safeyaml
from ..errors import KollaError, ValidationError
from .road import Road
from .statereturns import CHECKS_STATE, first_states, refused

SALT_BIN = Path(sys.executable).parent
# What `saltutil.sync_all` copies from the checkout's salt/_<kind> (the master's
# file_roots) to each minion's extmods/<kind>.
SYNCED = ("beacons", "grains", "modules", "states")
# How long a master waits, once a job's time is up, for a minion to say it still
# runs it (its gather_job_timeout, kolla_salt.roads.node).
GATHER_JOB_SECONDS = 30
# `salt -t` when every minion is asked something quick: a minion still working after
# it is asked again (find_job) and waited for; one that does not answer costs this
# plus GATHER_JOB_SECONDS, which `status` and preflight wait.
ANSWER_SECONDS = 10
# A deploy's prediction: a host that must pull its images first answers late.
PREDICT_SECONDS = 300
# How often `logs --follow` asks the host for new lines.
FOLLOW_PAUSE = 2


def synced_version(folder_of):
    """Hash of the synced module files, each kind read from folder_of(kind)."""
    digest = hashlib.sha256()
    for kind in SYNCED:
        for path in sorted(Path(folder_of(kind)).glob("kolla_*.py")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def pillar_summary(pillar):
    """What a host's compiled pillar says of itself, without its secrets: the digest
    of what its minion keeps between state runs (held_digest), to compare with the
    facts' digest of the one it holds, and of the Galera member it declares. Said by
    each minion (kolla_container.declaration) and by each host's prediction (the
    first state of kolla.deploy), so that the CLI builds no pillar."""
    from ..declaration.settings import database_service
    from ..operations.galera import spec_digest
    name = database_service()
    database = next((s for s in pillar["kolla"]["services"] if s["name"] == name), None)
    return {"pillar": held_digest(pillar), "galera_spec": spec_digest(database) if database else None}


def compared(facts, summary):
    """A host's pillar_summary against its facts: whether its minion holds that pillar
    already (else it is refreshed once the change is made) and the Galera member
    digest (Master.check_galera)."""
    return {"held": summary["pillar"] == (facts or {}).get("pillar"), "galera_spec": summary["galera_spec"]}


def held_digest(pillar):
    """A digest of what a minion uses of the pillar it holds between state runs: kolla
    but its services, which each state run compiles afresh (the settings, the passwords
    it redacts, pins), and the health loop's beacon and restart policy (Salt adds keys
    of its own, as `schedule`). kolla_container.facts reports the minion's; a master
    refreshes a minion's pillar only when it changed."""
    kept = {"kolla": {k: v for k, v in (pillar.get("kolla") or {}).items() if k != "services"},
            "beacons": pillar.get("beacons"), "kolla_health": pillar.get("kolla_health")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Master(Road):
    """A salt-master's config folder (`salt -c`); `netns` runs its clients in the
    network namespace it listens in (the lab's switch)."""

    def __init__(self, config_dir, netns=None, out=print):
        self.config_dir, self.netns, self.out = Path(config_dir), netns, out
        self.file = self.config_dir / "master"

    def opts(self):
        if not self.file.is_file():
            raise ValidationError([f"--master: {self.file} does not exist (give a salt-master's config folder)"])
        return safeyaml.load(self.file.read_text()) or {}

    def operator_folder(self):
        """The operator's folder (globals.yml, passwords.yml) the master's pillar reads."""
        return Path(self.opts().get("kolla_config_dir", "/etc/kolla-salt"))

    def command(self, tool, *args, timeout=60):
        import subprocess
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        return subprocess.run([*prefix, "timeout", str(timeout), str(SALT_BIN / tool), "-c", str(self.config_dir),
                               *map(str, args)], capture_output=True, text=True)

    def returns(self, target, function, *args, timeout=60):
        """{host: return} of `salt TARGET FUNCTION ARGS` (TARGET a glob, or a list of
        minion ids); hosts that did not answer are left out."""
        target = ["-L", ",".join(target)] if isinstance(target, list) else [target]
        # salt waits `timeout`, then GATHER_JOB_SECONDS for a minion that does not
        # answer; cut sooner, it prints nothing and every host would seem silent.
        proc = self.command("salt", *target, function, *args, "--out=json", "--static", "-t", timeout,
                            timeout=timeout + GATHER_JOB_SECONDS + 30)
        try:
            data = json.loads(proc.stdout or "{}")
        except json.JSONDecodeError:
            raise KollaError(f"salt {target} {function}: {(proc.stderr or proc.stdout).strip()[-500:]}")
        return {host: ret for host, ret in data.items() if not _no_answer(ret)}

    def minions(self):
        """Ids of the minions whose keys the master accepted: the files of its
        pki_dir/minions, read here (what `salt-key -L` lists, without its second of start)."""
        import salt.config
        accepted = Path(salt.config.master_config(str(self.file))["pki_dir"]) / "minions"
        try:
            return sorted(p.name for p in accepted.iterdir() if not p.name.startswith("."))
        except OSError as error:
            raise KollaError(f"the master's accepted minion keys ({accepted}): {error.strerror}")

    def ask_all(self, function, *args, timeout=ANSWER_SECONDS):
        """{accepted minion: its return of FUNCTION ARGS, None when it does not answer}
        (`salt '*'` leaves out minions that do not answer: the accepted keys list them,
        read while the minions answer)."""
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(1) as pool:
            found = pool.submit(self.returns, "*", function, *args, timeout=timeout)
            accepted = self.minions()
            return {m: found.result().get(m) for m in accepted}

    def sync_modules(self):
        self.host_facts()

    def interfaces(self):
        return {m: found and found["interfaces"] for m, found in self.host_facts().items()}

    def container(self, name, command):
        """HOST:CONTAINER: a container is held on one host."""
        if not name:
            raise ValidationError([f"{command}: through a master, name one container: HOST:CONTAINER"])
        host, _, container = name.partition(":")
        if not container or not host:
            raise ValidationError([f"{command}: through a master, name the host: HOST:CONTAINER (got '{name}')"])
        return host, container

    def follow_logs(self, host, name, tail, ask):
        """Asked again every FOLLOW_PAUSE seconds for the lines after the last answer's;
        ends, as `docker logs --follow` does, when the container no longer runs."""
        import time
        found = ask(None)
        while found["running"]:
            time.sleep(FOLLOW_PAUSE)
            found = ask(found["until"])
        return 0

    # -- before anything changes ------------------------------------------------------
    def preflight(self, declared=False):
        """Checks the hosts before a change; returns their facts, with which `declared`
        says what each host runs (its pillar is validated by Salt: the prediction, or
        `declaration`, whose question the facts answer too when asked with `declared`)."""
        from ..declaration.roles import apis_out_of_reach, placed_on, placement
        from ..declaration.settings import load_settings
        folder = self.operator_folder()
        hosts = self.host_facts(declared)
        accepted = sorted(hosts)
        if not accepted:
            raise KollaError(f"no minion key is accepted on the master ({self.config_dir}); nothing was changed")
        steps = placement(folder)
        settings = load_settings(folder)
        if len(accepted) > 1 and settings["enable_haproxy"] and not settings["enable_keepalived"]:
            raise ValidationError([f"{folder / 'globals.yml'}: key 'enable_haproxy' is true, but a VIP shared by "
                                   f"several hosts needs keepalived: set enable_keepalived: true (and a VIP of "
                                   f"the hosts' network), or enable_haproxy: false"])
        unplaced = [f"{folder / 'globals.yml'}: key '{step['key']}' ({', '.join(step['hosts'])}) matches no "
                    f"minion, so {step['service']} would run nowhere (minions: {', '.join(accepted)})"
                    for step in steps if not placed_on(step["hosts"], accepted)]
        if unplaced:
            raise ValidationError(unplaced)
        out_of_reach = apis_out_of_reach(settings, steps, accepted, folder / "globals.yml")
        if out_of_reach:
            raise ValidationError(out_of_reach)
        # Every host that cannot take part, named at once: one repair for all of them.
        unreachable = [f"host {m}: its salt-minion does not answer the master" if hosts[m] is None
                       else f"host {m}: its Docker engine does not answer ({hosts[m]['engine_error']})"
                       for m in accepted if hosts[m] is None or hosts[m]["engine_error"]]
        if unreachable:
            raise KollaError("; ".join(unreachable) + "; nothing was changed")
        return hosts

    def members(self, service, hosts):
        """(the minions of `hosts` that run `service`, its placement step)."""
        from ..declaration.roles import placed_on, placement
        step = next((s for s in placement(self.operator_folder()) if s["service"] == service), None)
        if step is None:
            return [], None
        return placed_on(step["hosts"], sorted(hosts)), step

    def database_members(self, facts=None):
        """(the hosts of the database's members, its placement target) from the hosts'
        `facts`; a ValidationError when it runs on no host."""
        from ..declaration.settings import database_service
        name = database_service()
        members, step = self.members(name, facts or self.preflight())
        if not members:
            raise ValidationError([f"{self.operator_folder()}/globals.yml: {name} runs on no host (enable_{name}, "
                                   f"roles)"])
        return members, step["target"]

    def galera_recovery(self):
        """The member with the highest committed position bootstraps, the others rejoin
        one at a time (salt/_runners/kolla_galera.py)."""
        from ..declaration.settings import database_service
        name = database_service()
        members, step = self.members(name, self.preflight())
        if len(members) < 2:
            raise ValidationError([f"{self.operator_folder()}/globals.yml: {name} runs on "
                                   f"{', '.join(members) or 'no host'}: a Galera cluster needs at least 2 hosts "
                                   f"(roles.{name} or the control role)"])
        self.say(f"[mariadb-recovery] stopping the members on {', '.join(members)}, reading their committed "
                 f"positions")
        ok, result = self.run("kolla_galera.recover", target=step["target"])
        return members, ok, result

    def check_galera(self, facts, hosts):
        """A deploy that would have to found a Galera cluster from a member that may lack
        committed rows is refused here, before anything changes (kolla_salt.operations.galera.plan;
        the runner decides the same again when it starts the members). A host's facts
        say what its member holds where the pillar it holds declares the member its
        pillar now declares (`hosts`: the declaration); the others are asked."""
        from ..declaration.settings import database_service
        from ..operations import galera
        members, _ = self.members(database_service(), facts)
        if len(members) < 2:
            return
        said = {}
        for host in members:
            held = dict((facts.get(host) or {}).get("galera") or {})
            spec = held.pop("spec", None)
            # No member held and none known declared (a prediction refused while another
            # walk runs says nothing) is no match: the host is asked.
            if spec is not None and spec == hosts[host].get("galera_spec"):
                said[host] = held
        asked = [host for host in members if host not in said]
        galera.plan({**said, **(self.returns(asked, "kolla_galera.facts", timeout=60) if asked else {})}, members)

    def run(self, function, timeout=1800, **kwargs):
        """salt-run FUNCTION KEY=VALUE...: (succeeded, its return)."""
        proc = self.command("salt-run", function, *(f"{k}={v}" for k, v in kwargs.items()), "--out=json",
                            timeout=timeout)
        try:
            return proc.returncode == 0, json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise KollaError(f"salt-run {function}: {(proc.stderr or proc.stdout).strip()[-2000:]}")

    def say(self, line):
        """A line of progress for the operator, seen at once."""
        self.out(line)
        sys.stdout.flush()

    def compute(self, action, host, timeout):
        """salt-run state.orchestrate kolla.compute: the runner speaks to the cloud from
        the master (salt/_runners/kolla_compute.py); what it did is said when it ends."""
        self.say(f"[compute {action}] {host}: salt-run state.orchestrate kolla.compute on the master")
        ok, steps = self.orchestrate("kolla.compute", {"kolla_compute": {"action": action, "host": host,
                                                                          "timeout": timeout}},
                                     timeout=int(timeout) + 120)
        for step in steps:
            if step_note(step):
                self.say(step_note(step))
        failed = next((step for step in steps if step_failure(step)), None)
        if failed and _runner_return(failed).get("refused"):
            raise ValidationError([step_failure(failed)])
        if not ok or failed:
            raise KollaError(step_failure(failed) if failed else "salt-run state.orchestrate kolla.compute failed")

    # -- the database (salt/_runners/kolla_galera.py) -----------------------------------
    def secrets_folder(self, name):
        """Beside the operator folder (never through Salt)."""
        from ..operations.backup import master_secrets
        return master_secrets(self.operator_folder(), name).parent

    def backup(self, why, incremental, target):
        """kolla_galera.backup: the last Synced member of the hosts `target` places
        mariadb on is copied, desynced meanwhile; its manifest with the "host" that
        keeps it (the secrets its data needs stay on the master). Fails saying why."""
        self.say(f"[mariadb-backup] copying the last Synced member of {target}")
        ok, result = self.run("kolla_galera.backup", target=target, why=json.dumps(why), incremental=incremental,
                              timeout=3700)
        result = result if isinstance(result, dict) else {"error": str(result)}
        if result.get("error") or not ok or not result.get("manifest"):
            raise KollaError(result.get("error") or "salt-run kolla_galera.backup failed")
        self.say(f"[mariadb-backup] {result['note']}")
        return {**result["manifest"], "host": result["host"]}

    def declared(self, hosts=None):
        """{host: {"services": the entries the CLI reads}} of every host of `hosts` (their
        names, or their facts; the accepted minions when not given)
        (kolla_salt.declaration.roles.declared_services: from the folders' definitions, no
        file rendered and no secret read)."""
        from ..declaration.pins import load_pins
        from ..declaration.roles import declared_services
        from ..declaration.settings import load_settings
        folder = self.operator_folder()
        settings, pins = load_settings(folder), load_pins(folder)
        return {host: {"services": declared_services(settings, pins, host)}
                for host in sorted(self.minions() if hosts is None else hosts)}

    def validate(self):
        """Every service is placed (kolla_salt.declaration.roles.placement); each host's
        pillar compiles where it runs (declaration)."""
        from ..declaration.roles import placement
        return placement(self.operator_folder())

    def declaration(self, facts=None, warnings=None):
        """declared, with what the pillar Salt compiles for each host says of itself
        (kolla_container.declaration, compared with the facts: whether the minion holds
        it, the Galera member's digest): for a command without a prediction to say it.
        Refused, naming the host, the file and the key, when a service is placed nowhere
        or a host's pillar does not compile (its Salt says the warnings). Asked of the
        hosts (after preflight when no `facts`) unless their facts said it
        (preflight's `declared`)."""
        self.validate()
        return self._compiled(self.preflight(declared=True) if facts is None else facts)

    def _compiled(self, facts):
        """declaration's answer once the declaration validated."""
        said = {host: found["declared"] for host, found in facts.items() if "declared" in (found or {})}
        if set(said) != set(facts):
            said = self.returns(sorted(facts), "kolla_container.declaration", timeout=120)
        problems = []
        for host in sorted(facts):
            found = said.get(host)
            if isinstance(found, dict):
                problems.extend(f"host {host}: {problem}" for problem in found["problems"])
            else:   # Salt's words when the function failed: their last line says why
                problems.append(f"host {host}: its salt-minion did not say what its pillar holds "
                                f"({str(found or 'no answer').strip().splitlines()[-1]})")
        if problems:
            raise ValidationError(problems)
        return {host: {**declared, **compared(facts[host], said[host])}
                for host, declared in self.declared(facts).items()}

    def check_images(self, hosts):
        """Nothing here: the hosts pull their images from docker_registry."""

    def deploying(self, names):
        """Every host's facts (preflight) and what the declaration places on it, the
        names checked against the services of some host (in deploy order; [] for all);
        each host's prediction says what its pillar says of itself."""
        from ..declaration.preflight import unknown_services
        from ..declaration.tree import all_services
        facts = self.preflight()
        hosts = self.declared(facts)
        services = all_services(hosts)
        unknown = unknown_services([s["name"] for s in services], names)
        if unknown:
            raise ValidationError(unknown)
        return facts, hosts, [s["name"] for s in services if s["name"] in names]

    def upgrade_checks(self, old, names, allow_jump, release):
        """In one Salt round every host's facts (the release each container runs: a jump
        from the `old` declaration to `release` refused) and its pillar."""
        from ..declaration.preflight import check_release_paths
        self.validate()
        facts = self.preflight(declared=True)
        check_release_paths(release_paths(old, facts, names, release), allow_jump)
        return facts, self._compiled(facts), []

    def prepare_images(self, settings, services):
        """Nothing here: the hosts pull their images from docker_registry."""

    def redeclared(self, facts, hosts, allow_jump):
        from ..declaration.preflight import check_release_paths
        hosts = hosts or self.declaration(facts)
        if allow_jump:
            check_release_paths(release_paths(hosts, facts, []), allow_jump)
        return hosts

    def host_facts(self, declared=False):
        """{accepted minion: its kolla_container.facts (with `declared`, what its pillar
        says of itself: Master.declaration), None when it does not answer}; hosts
        running other module code than the checkout's are synced first (saltutil.sync_all)."""
        local = synced_version(lambda kind: paths.REPO / "salt" / f"_{kind}")
        asked = ["kolla_container.facts", *(["declared=True"] if declared else [])]
        facts = self.ask_all(*asked)
        stale = [m for m, f in facts.items() if f is not None and (not isinstance(f, dict) or f["code"] != local)]
        if stale:
            self.out(f"[master] syncing the checkout's Salt modules to {', '.join(stale)}")
            self.returns(stale, "saltutil.sync_all", timeout=120)
            facts.update(self.returns(stale, *asked, timeout=ANSWER_SECONDS))
        return {m: f if isinstance(f, dict) else None for m, f in facts.items()}

    def predict(self, hosts, pillar):
        """{host: its kolla.deploy state run under test=True, with `pillar` (a deploy's:
        kolla_services, kolla_allow_release_jump)}, asked of every host at once: what a
        deploy would change. It may pull images (comparing needs their ids), hence the
        long wait. A host that gives no answer is left out."""
        return self.returns(list(hosts), "state.sls", "kolla.deploy", "test=True",
                            *([f"pillar={json.dumps(pillar)}"] if pillar else []), timeout=PREDICT_SECONDS)

    def refresh_pillars(self, hosts):
        """Minions take their beacons (the health loop) and settings from pillar: a
        host that does not hold what was declared (`hosts`: the declaration) is
        refreshed, and waited for (bounded), so what a host holds once the command
        returns is what was declared. The others are left alone: a refresh reloads a
        minion's modules, about a second of CPU each. Returns the hosts refreshed."""
        changed = [host for host, declared in sorted(hosts.items()) if not declared.get("held")]
        if changed:
            self.command("salt", "-L", ",".join(changed), "saltutil.refresh_pillar", "wait=True", "-t", 30,
                         timeout=30)
        return changed

    # -- changes ---------------------------------------------------------------------
    def converge(self, command, pillar, test=False, hosts=None, facts=None, predict=False):
        """`command` (deploy, upgrade) walked across the hosts: salt-run
        state.orchestrate kolla.COMMAND with `pillar`, on `hosts` (Master.declaration)
        whose `facts` the preflight gave. With `predict` (a deploy) every host predicts
        first, in one state run (Master.predict): its first states refuse a bad
        declaration before anything changes anywhere (statereturns.refused), each says
        what its pillar says of itself (taken into `hosts`), Galera's founder is
        checked, and it is the whole answer to --test and to a deploy that changes
        nothing (no walk). `command` names the orchestration: deploy, upgrade (its
        first step backs the database up when a container changes release: pillar
        kolla_backup_before_migrations), restore and rollback_release (pillar
        kolla_restore: a backup, the restore, then kolla.deploy's walk), rotate_keys
        (the keys rotated on the master, then kolla.deploy's walk of their services).
        (ok, [{"hosts": {host: states}, "note", "timing", "failure"} of each step,
        those of a nested orchestration among them]) for the CLI to say."""
        from .rollout import changing_hosts, describe
        names = pillar.get("kolla_services") or []
        for host, declared in sorted(hosts.items()):
            self.say(f"[{command}] {host}: " + (", ".join(s["name"] for s in declared["services"]
                                                         if not names or s["name"] in names) or "nothing"))
        predicted = self.predict(sorted(hosts), pillar) if predict else {}
        refused(predicted)
        take_what_pillars_said(hosts, facts, predicted)
        from ..declaration.settings import database_service
        if predict and (not names or database_service() in names):
            self.check_galera(facts, hosts)
        if predict and set(predicted) == set(hosts) and (test or not changing_hosts(predicted)):
            self.say(f"[{command}] predicted: kolla.deploy under test=True on every host at once")
            if not test:
                self.say(f"[{command}] {describe({})}")
            return True, [{"hosts": predicted}]
        how = "one state run on every host: a prediction has no order to keep" if test else WALKS[command]
        self.say(f"[{command}] {'checking' if test else 'running'} salt-run state.orchestrate kolla.{command} ({how})")
        ok, steps = self.orchestrate(f"kolla.{command}", pillar, test=test)
        return ok, [said_step(step) for step in steps]

    def settle(self, command, hosts=None):
        """After a change: the minions whose pillar changed take it (refresh_pillars)."""
        refreshed = self.refresh_pillars(hosts or {})
        if refreshed:
            self.say(f"[{command}] pillar refreshed on {', '.join(refreshed)} (what their minions hold changed)")

    def orchestrate(self, sls, pillar=None, test=False, timeout=3600):
        """salt-run state.orchestrate SLS; returns (succeeded, the return of each step in run order)."""
        args = ["state.orchestrate", sls, f"pillar={json.dumps(pillar or {})}", "--out=json"]
        proc = self.command("salt-run", *args, *(["test=True"] if test else []), timeout=timeout)
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise KollaError(f"salt-run state.orchestrate {sls}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
        steps = next(iter(data.get("data", {}).values()), {})
        if not isinstance(steps, dict):
            raise KollaError(f"salt-run state.orchestrate {sls}: {steps}")
        # Salt marks the steps' returns (__FAILHARD__: a step failed, the rest did not
        # run). Anything else that is no step's tag (state_|-id_|-name_|-function) is
        # said as it is, not taken for a step.
        steps = {key: ret for key, ret in steps.items() if not key.startswith("__")}
        said = {key: ret for key, ret in steps.items() if "_|-" not in key}
        if said:
            raise KollaError(f"salt-run state.orchestrate {sls}: {json.dumps(said)[-2000:]}")
        return proc.returncode == 0 and data.get("retcode", 0) == 0, flattened(steps)


def flattened(steps):
    """The returns of an orchestration's steps ({tag: return}) in run order, each with
    its "__id__"; a step that ran an orchestration of its own (salt.runner
    state.orchestrate: kolla.restore's deploy) is followed by that one's steps, so
    that what each host did is said as for a walk of its own."""
    ordered = []
    # A parallel step's return has no __id__: its tag (state_|-id_|-name_|-function) has.
    for tag, ret in sorted(steps.items(), key=lambda item: item[1].get("__run_num__", 0)):
        ordered.append({"__id__": tag.split("_|-")[1], **ret})
        nested = _runner_return(ordered[-1]).get("data")
        if isinstance(nested, dict) and len(nested) == 1 and isinstance(next(iter(nested.values())), dict):
            ordered.extend(flattened({key: found for key, found in next(iter(nested.values())).items()
                                      if "_|-" in key and isinstance(found, dict)}))
    return ordered


# How a real walk goes (kolla_salt.roads.rollout.walk), for the operator.
WALKS = {"deploy": "a prediction first, then each set where it changes something, once the sets it waits for are "
                   "healthy, side by side with the sets that do not wait for each other",
         "upgrade": "a prediction first, then set by set and batch by batch where it changes something, each gated "
                    "on the health of the one before",
         **dict.fromkeys(("restore", "rollback_release"), "a backup of what it replaces, the restore, then "
                                                            "kolla.deploy's walk"),
         "rotate_keys": "the keys rotated once every host holds the current ones, then kolla.deploy's walk"}


def release_paths(hosts, facts, names, release=None):
    """{host: (its services of `names`, all when empty, declared at `release` when
    given, {container: the release it runs})} of `hosts` (a declaration) and their
    `facts`, for kolla_salt.declaration.preflight.check_release_paths."""
    return {host: ([{**s, **({"release": release} if release else {})}
                    for s in declared["services"] if not names or s["name"] in names], facts[host]["releases"])
            for host, declared in hosts.items()}


def take_what_pillars_said(hosts, facts, predicted):
    """Each host's prediction says what its pillar says of itself (the first state's
    `declared`, pillar_summary): taken into `hosts` against its facts (whether its
    minion holds that pillar, its Galera member). A host that said nothing is
    refreshed after the walk and its member asked."""
    for host, states in predicted.items():
        said = (first_states(states).get(CHECKS_STATE) or {}).get("declared")
        if said:
            hosts[host].update(compared(facts[host], said))


def _no_answer(ret):
    return isinstance(ret, str) and ret.startswith("Minion did not return")


def _runner_return(step):
    found = (step.get("changes") or {}).get("return")
    return found if isinstance(found, dict) else {}


def host_returns(step):
    """{host: {state id: return}} of one step of an orchestration: a salt.state step's,
    or a runner's that returns them under "ret" (salt/_runners/kolla_galera.py)."""
    hosts = (step.get("changes") or {}).get("ret") or _runner_return(step).get("ret") or {}
    return {host: states for host, states in hosts.items() if isinstance(states, dict)}


def step_timing(step):
    """When a step of an orchestration began (the master's clock) and how long it took:
    where a walk's time goes, and which steps ran side by side."""
    return f"{step['__id__']}: began {step.get('start_time')}, took {step.get('duration', 0) / 1000:.1f} s"


def step_note(step):
    """What a runner step says it did, for the operator (salt/_runners/kolla_rollout.py), or None."""
    return _runner_return(step).get("note")


def said_step(step):
    """A step of an orchestration as the CLI says it: its hosts' state returns, the
    runner's note, its timing and why it failed (None when it did not)."""
    failure = step_failure(step)
    return {"hosts": host_returns(step), "note": step_note(step), "timing": step_timing(step),
            "failure": failure and f"{step['__id__']}: {failure}"}   # a runner step's name is its function


def step_failure(step):
    """Why a step failed, for the operator (None when it did not): a runner's own
    message, else Salt's comment. A runner that returned no dict failed too, whatever
    Salt says (it reports the usage text of a runner called wrongly as a success)."""
    found = (step.get("changes") or {}).get("return", {})
    if not isinstance(found, dict):
        return str(found).strip()
    if step.get("result") is False or found.get("error"):
        return found.get("error") or step.get("comment")
    return None
