"""What a salt-master's walk of the container-set tree decides, free of Salt: its
runners (salt/_runners) pass in a LocalClient and what the minions returned.

A walk (salt/states/kolla/orchestrate.jinja) first predicts, in one state run on
every host at once (kolla.deploy with test=True), and then visits a set only on the
hosts where the prediction changes something of it: a set with nothing to change
would be a step of a second or more for nothing (a deploy with nothing to change in
the HA lab: 10 steps, 20 s)."""


def ask(client, hosts, function, args=(), kwarg=None, timeout=120, attempts=3):
    """{host: return}; hosts whose return did not come are asked again (LocalClient
    can give up on a return that arrives after its job lookup said the job ended)."""
    answers = {}
    for _ in range(attempts):
        missing = [h for h in hosts if h not in answers]
        if not missing:
            break
        answers.update(client.cmd(missing, function, list(args), tgt_type="list", timeout=timeout,
                                  full_return=False, kwarg=kwarg) or {})
    return answers


def _touched(states):
    """The SLS names (kolla.<service>, kolla.undeclared) of a prediction that would change
    something or failed; None when the host gave no state returns (a render error, no
    answer): then a real run must say what is wrong."""
    if not isinstance(states, dict) or not all(isinstance(ret, dict) for ret in states.values()):
        return None
    return {ret.get("__sls__") for ret in states.values() if ret.get("result") is not True or ret.get("changes")}


def hosts_to_visit(predicted, placed):
    """{sls: [hosts]}: of the hosts each SLS runs on (`placed`: {sls: [hosts]}), those
    whose prediction (`predicted`: {host: its state.sls return under test=True})
    changes something of it or fails, or which gave none. A real run on the others
    would change nothing: its states compare the same declaration with the same
    containers, and an unchanged container is not checked again either."""
    touched = {host: _touched(states) for host, states in predicted.items()}
    return {sls: [h for h in hosts if h not in touched or touched[h] is None or sls in touched[h]]
            for sls, hosts in placed.items()}


def _label(sls):
    return "the removal of undeclared containers" if sls == "kolla.undeclared" else sls.removeprefix("kolla.")


def describe(visit):
    """One line for the operator: which sets the walk visits, and where."""
    changing = [f"{_label(sls)} ({', '.join(hosts)})" for sls, hosts in visit.items() if hosts]
    unchanged = [_label(sls) for sls, hosts in visit.items() if not hosts]
    if not changing:
        return "predicted: nothing to change on any host; no set visited"
    return ("predicted changes in " + ", ".join(changing)
            + (f"; nothing to change in {', '.join(unchanged)}: not visited" if unchanged else ""))
