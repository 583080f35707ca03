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
import fnmatch
import json
import sys
from pathlib import Path

import yaml

from .errors import KollaError, ValidationError

SALT_BIN = Path(sys.executable).parent


class Master:
    """A salt-master's config folder (`salt -c`); `netns` runs its clients in the
    network namespace it listens in (the lab's switch)."""

    def __init__(self, config_dir, netns=None, out=print):
        self.config_dir, self.netns, self.out = Path(config_dir), netns, out
        self.file = self.config_dir / "master"

    def opts(self):
        if not self.file.is_file():
            raise ValidationError([f"--master: {self.file} does not exist (give a salt-master's config folder)"])
        return yaml.safe_load(self.file.read_text()) or {}

    def operator_folder(self):
        """The operator's folder (globals.yml, passwords.yml) the master's pillar reads."""
        return Path(self.opts().get("kolla_config_dir", "/etc/kolla-salt"))

    def command(self, tool, *args, timeout=60):
        import subprocess
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        return subprocess.run([*prefix, "timeout", str(timeout), str(SALT_BIN / tool), "-c", str(self.config_dir),
                               *map(str, args)], capture_output=True, text=True)

    def returns(self, target, function, *args, timeout=60):
        """{host: return} of `salt TARGET FUNCTION ARGS`; hosts that did not answer are left out."""
        proc = self.command("salt", target, function, *args, "--out=json", "--static", "-t", timeout,
                            timeout=timeout + 30)
        try:
            data = json.loads(proc.stdout or "{}")
        except json.JSONDecodeError:
            raise KollaError(f"salt {target} {function}: {(proc.stderr or proc.stdout).strip()[-500:]}")
        return {host: ret for host, ret in data.items() if not _no_answer(ret)}

    def minions(self):
        """Ids of the minions whose keys the master accepted."""
        proc = self.command("salt-key", "-L", "--out=json")
        try:
            return sorted(json.loads(proc.stdout)["minions"])
        except (json.JSONDecodeError, KeyError):
            raise KollaError(f"salt-key: {(proc.stderr or proc.stdout).strip()[-500:]}")

    # -- before anything changes ------------------------------------------------------
    def preflight(self):
        """Checks everything knowable before a change; returns {host: its pillar}."""
        from .inventory import build_pillar, placement
        folder = self.operator_folder()
        accepted = self.minions()
        if not accepted:
            raise KollaError(f"no minion key is accepted on the master ({self.config_dir}); nothing was changed")
        steps = placement(folder)
        unplaced = [f"{folder / 'globals.yml'}: key '{step['key']}' ({', '.join(step['hosts'])}) matches no "
                    f"minion, so {step['service']} would run nowhere (minions: {', '.join(accepted)})"
                    for step in steps if not any(fnmatch.fnmatch(m, p) for m in accepted for p in step["hosts"])]
        if unplaced:
            raise ValidationError(unplaced)
        grains = self.returns("*", "grains.item", "ip4_interfaces", timeout=10)
        silent = [m for m in accepted if m not in grains]
        if silent:
            raise KollaError("; ".join(f"host {m}: its salt-minion does not answer the master" for m in silent)
                             + "; nothing was changed")
        problems, pillars = [], {}
        for host in accepted:
            try:
                pillars[host] = build_pillar(folder, minion_id=host, interfaces=grains[host]["ip4_interfaces"])
            except ValidationError as error:
                problems.extend(f"host {host}: {problem}" for problem in error.problems)
        if problems:
            raise ValidationError(problems)
        # The hosts run the checkout's modules and the pillar just validated.
        self.returns("*", "saltutil.sync_all", timeout=120)
        self.returns("*", "saltutil.refresh_pillar", "wait=True", timeout=60)
        engines = self.returns("*", "kolla_container.engine", timeout=30)
        dead = [f"host {m}: its Docker engine does not answer ({(engines.get(m) or {}).get('error', 'no answer')})"
                for m in accepted if not (engines.get(m) or {}).get("answers")]
        if dead:
            raise KollaError("; ".join(dead) + "; nothing was changed")
        return pillars

    # -- changes ---------------------------------------------------------------------
    def orchestrate(self, sls, pillar=None, test=False, timeout=3600):
        """salt-run state.orchestrate SLS; returns (succeeded, [(step id, host, state return)])."""
        args = ["state.orchestrate", sls, f"pillar={json.dumps(pillar or {})}", "--out=json"]
        proc = self.command("salt-run", *args, *(["test=True"] if test else []), timeout=timeout)
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise KollaError(f"salt-run state.orchestrate {sls}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
        steps = next(iter(data.get("data", {}).values()), {})
        if not isinstance(steps, dict):
            raise KollaError(f"salt-run state.orchestrate {sls}: {steps}")
        return proc.returncode == 0 and data.get("retcode", 0) == 0, sorted(
            steps.values(), key=lambda ret: ret.get("__run_num__", 0))


def _no_answer(ret):
    return isinstance(ret, str) and ret.startswith("Minion did not return")


def host_returns(step):
    """{host: {state id: return}} of one salt.state step of an orchestration."""
    hosts = (step.get("changes") or {}).get("ret") or {}
    return {host: states for host, states in hosts.items() if isinstance(states, dict)}
