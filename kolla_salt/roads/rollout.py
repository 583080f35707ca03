"""What a salt-master's walk of the container-set tree decides, free of Salt: its
runners (salt/_runners) pass in a LocalClient and what the minions returned.

A walk (salt/states/kolla/orchestrate.jinja) first predicts, in one state run on
every host at once (kolla.deploy with test=True), and then visits a set only on the
hosts where the prediction changes something of it: a set with nothing to change
would be a step of a second or more for nothing (a deploy with nothing to change in
the HA lab: 10 steps, 20 s). `walk` plans its steps (a deploy's side by side where
the tree lets them, an upgrade's one after the other); `hold_walk_lock` keeps a
master to one walk at a time."""
import fcntl
import os


class WalkInProgress(Exception):
    pass


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
    """The SLS names (kolla.<service>, kolla.final, kolla.undeclared) of a prediction that would change
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


def changing_hosts(predicted):
    """The hosts whose prediction ({host: its state.sls return under test=True})
    changes or fails something, or is no state returns; none: a walk would visit
    no set."""
    return sorted(host for host, states in predicted.items() if _touched(states) != set())


def _label(sls):
    return {"kolla.undeclared": "the removal of undeclared containers",
            "kolla.final": "the jobs after every service"}.get(sls, sls.removeprefix("kolla."))


def describe(visit):
    """One line for the operator: which sets the walk visits, and where."""
    changing = [f"{_label(sls)} ({', '.join(hosts)})" for sls, hosts in visit.items() if hosts]
    unchanged = [_label(sls) for sls, hosts in visit.items() if not hosts]
    if not changing:
        return "predicted: nothing to change on any host; no set visited"
    return ("predicted changes in " + ", ".join(changing)
            + (f"; nothing to change in {', '.join(unchanged)}: not visited" if unchanged else ""))


def hold_walk_lock(path):
    """Holds the lock at `path` until this process (salt-run, which renders and runs
    the walk, and the processes it forks for parallel steps) ends; WalkInProgress,
    naming the holder's pid, while another process holds it. A descriptor the kernel
    releases at the process's end: no stale lock after a kill."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode().strip()
        os.close(fd)
        if holder == str(os.getpid()):   # this walk, rendered again
            return
        raise WalkInProgress(f"another walk of this master is running (salt-run, pid {holder}): "
                             "wait until it ends; two walks would change the same containers at once") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())   # kept open on purpose: the lock lasts as long as the process


def refusal(text):
    """The steps of a walk that must not run: one, which fails saying why (nothing changes)."""
    return [{"name": "refused", "runner": "kolla_rollout.refuse", "args": {"text": text}, "require": [],
             "parallel": False}]


def _groups(placed, visit, batch):
    """Consecutive services on the same hosts, visited, in one state run (in tree order,
    failhard on each host): the same gating, one round trip less. In a deploy only a
    service that waits for nothing more than the group does joins it (keystone, which
    waits for the database, does not join RabbitMQ's group: RabbitMQ would wait too). A
    service with a `rollout` runner (mariadb: Galera) is a group of its own and gets all
    its members; a `serial` one goes a host at a time (rabbitmq: nodes that start at
    once could each found a cluster), in a deploy too."""
    groups = []
    for entry in placed:
        hosts = visit.get(f"kolla.{entry['service']}")
        if not hosts:
            continue
        rollout, serial, after = entry.get("rollout"), bool(entry.get("serial")), set(entry["after"])
        pause = entry.get("pause", 0) if batch else 0
        hosts = [] if rollout else hosts
        last = groups[-1] if groups else None
        if (last and last["hosts"] == hosts and not (rollout or last["rollout"]) and last["serial"] == serial
                and last["pause"] == pause and (batch or after - set(last["services"]) <= last["after"])):
            last["services"].append(entry["service"])
            last["after"] |= after
        else:
            groups.append({"services": [entry["service"]], "hosts": hosts, "target": entry["target"],
                           "rollout": rollout, "serial": serial, "pause": pause, "after": after})
    return groups


def walk(placed, visit, note, batch=None, undeclared=True):
    """The steps of a real walk across hosts once it has predicted (`visit`: {sls:
    [hosts]}, `note`: what the prediction found), in the order they are declared:
    [{"name", then "hosts" and "sls" (a state run) or "runner" and "args", "require":
    [names], "onchanges": [names], "parallel"}]. `placed` is the pillar's
    kolla:placement (tree order: service, target, rollout, serial, pause, after).

    With `batch` (an upgrade) every step waits for the one before: hosts go `batch` at
    a time in the order of their ids, one step per batch (a failing batch is its own
    step, naming its hosts, after which nothing runs), and a service's `pause` is
    waited after each batch that changed something. Without (a deploy) a step waits
    only for the steps of the services its own services wait for (`after`, from the
    tree), and the others run beside it, each in a process of its own on the master and as a
    concurrent state run on the minions: the database, RabbitMQ and memcached change
    at the same time, keystone once the database and memcached are done. A failed
    step then stops what waits for it; what runs beside it goes on (the rule of a
    host's first deploy, salt/states/kolla/service.jinja)."""
    side_by_side = not batch
    steps = [{"name": "predicted", "runner": "kolla_rollout.note", "args": {"text": note}, "require": [],
              "parallel": False}]
    last_step = {}   # service -> the name of its group's last step: what waits for it requires that
    for group in _groups(placed, visit, batch):
        size = 1 if group["serial"] else batch
        chunks = [group["hosts"][i:i + size] for i in range(0, len(group["hosts"]), size)] \
            if size and group["hosts"] else [group["hosts"]]
        waited = sorted({last_step[s] for s in group["after"] - set(group["services"]) if s in last_step})
        previous = steps[-1]["name"]
        for index, hosts in enumerate(chunks):
            name = "-".join(group["services"]) + (f"-on-{'-'.join(hosts)}" if size and group["hosts"] else "")
            require = ([previous] if not side_by_side or index else waited)
            if group["rollout"]:
                step = {"name": name, "runner": group["rollout"],
                        "args": {"target": group["target"], **({"concurrent": True} if side_by_side else {})}}
            else:
                step = {"name": name, "hosts": hosts, "sls": [f"kolla.{s}" for s in group["services"]]}
            steps.append({**step, "require": require, "parallel": side_by_side})
            previous = name
            if group["pause"] and index < len(chunks) - 1:
                previous = f"{name}-pause"
                reason = (f"clients use {', '.join(group['services'])} on {', '.join(hosts)} again "
                          "before the next host's goes")
                steps.append({"name": previous, "runner": "kolla_rollout.pause",
                              "args": {"seconds": group["pause"], "reason": reason}, "onchanges": [name],
                              "parallel": False})
        for service in group["services"]:
            last_step[service] = previous
    # Once every service's steps are done: the jobs that wait for all of them, then (a
    # full walk) the removal of what is declared nowhere.
    for sls, name in (("kolla.final", "final-jobs"), ("kolla.undeclared", "only-declared")):
        if visit.get(sls) and (undeclared or sls != "kolla.undeclared"):
            require = sorted(set(last_step.values())) if side_by_side else [steps[-1]["name"]]
            steps.append({"name": name, "hosts": visit[sls], "sls": [sls], "require": require or ["predicted"],
                          "parallel": False})
    return steps
