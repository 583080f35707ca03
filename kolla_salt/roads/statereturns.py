"""A Salt state run's return as the operator reads it: what changed, what failed,
what kolla.deploy's first states refused. The same on one host (salt-call) and
through a master (each host's part)."""


def summarise(data, out=print):
    """Prints what changed and what failed; returns (changed, failed, total)."""
    if not isinstance(data, dict):
        out(str(data))
        return 0, 1, 0
    changed = failed = 0
    for _, ret in sorted(data.items(), key=lambda item: item[1].get("__run_num__", 0)):
        if ret.get("result") is False:
            failed += 1
            out(f"FAILED  {ret.get('name')}: {ret.get('comment')}")
        elif ret.get("changes"):
            changed += 1
            word = "WOULD" if ret.get("result") is None else "changed"
            out(f"{word:7} {ret.get('name')}: {ret.get('comment')}")
            for key, value in ret["changes"].items():
                out(f"          {key}: {value}")
    return changed, failed, len(data)


def on_host(host):
    """The prefix naming the host a line is about (none on one host, keyed None)."""
    return f"{host}: " if host else ""


# The ids of kolla.deploy's first states (salt/states/kolla/deploy.sls): their
# verdict is a deploy's refusal before anything changed, on one host or any.
CHECKS_STATE, IN_USE_STATE = "kolla-deploy-checks", "kolla-deploy-nothing-kept-in-use"


def first_states(states):
    """{id: return} of kolla.deploy's first states in a state run's return."""
    if not isinstance(states, dict):
        return {}
    return {tag.split("_|-")[1]: ret for tag, ret in states.items()
            if tag.count("_|-") == 3 and tag.split("_|-")[1] in (CHECKS_STATE, IN_USE_STATE)}


def refused(by_host):
    """What kolla.deploy's first states said on each host of {host (None: this host):
    its state run}: bad input (an unknown service, a release jump, an image not
    there, operator files that do not validate) raises ValidationError, containers a
    full deploy would remove though something uses them KollaError; what they noted
    (a release jump allowed, a warning) is printed."""
    import sys
    from ..errors import KollaError, ValidationError
    problems, kept = [], []
    for host, states in sorted(by_host.items(), key=lambda item: item[0] or ""):
        first = first_states(states)
        checks, in_use = first.get(CHECKS_STATE), first.get(IN_USE_STATE)
        lines = checks["comment"].splitlines() if checks else []
        if checks and checks["result"] is False:
            problems += [f"{on_host(host)}{line}" for line in lines]
        for line in lines if checks and checks["result"] is not False else ():
            warning = line.removeprefix("warning: ")
            if warning != line:
                print(f"warning: {on_host(host)}{warning}", file=sys.stderr)
            else:
                print(f"[deploy] {on_host(host)}{line}")
        if in_use and in_use["result"] is False:
            kept.append(f"{on_host(host)}{in_use['comment']}")
    if problems:
        raise ValidationError(problems)
    if kept:
        raise KollaError("; ".join(kept) + "; nothing was changed")


def services_run(states):
    """The services whose states a state run of kolla.deploy holds (their sls
    kolla.SERVICE), in the shape of a declaration's entries ({"name"})."""
    found = {ret["__sls__"].removeprefix("kolla.") for ret in states.values()
             if isinstance(ret, dict) and str(ret.get("__sls__", "")).startswith("kolla.")} \
        if isinstance(states, dict) else set()
    return [{"name": name} for name in sorted(found)]
