"""MariaDB Galera: whether a deploy bootstraps a cluster, joins one or refuses, and
which member a recovery bootstraps from (docs/design.md: "MariaDB Galera").

The decisions are pure functions of what each member's host reports (`member_facts`,
run there by the execution module kolla_galera); the master's runner kolla_galera
and the CLI's preflight call the same ones.
"""
import hashlib
import json
import os
import re

from ..errors import KollaError

DATADIR = "/var/lib/mysql"
# Left in the datadir by `mark_bootstrap`; kolla_mariadb_start consumes it and starts
# that member with --wsrep-new-cluster (images/mariadb). A file, not a spec key: a
# container's identity must not change with it, and a restart after it was consumed
# joins the cluster instead of founding a second one.
BOOTSTRAP_FLAG = ".kolla-galera-bootstrap"
RECOVERY = "kolla-salt mariadb-recovery"
NO_UUID = "00000000-0000-0000-0000-000000000000"


class GaleraRefused(KollaError):
    """No member can be started without risking committed rows."""


def parse_grastate(text):
    """{uuid, seqno, safe_to_bootstrap} of a grastate.dat."""
    found = dict(re.findall(r"^(uuid|seqno|safe_to_bootstrap):\s*(\S+)", text or "", re.M))
    return {"uuid": found.get("uuid", NO_UUID), "seqno": int(found.get("seqno", -1)),
            "safe_to_bootstrap": found.get("safe_to_bootstrap") == "1"}


def plan(facts, hosts):
    """(bootstrap host or None, the order to start members in) from {host: member_facts}.

    - a member is running in the primary component: the others join it (running ones first);
    - no host holds data: the first host bootstraps a new cluster;
    - one host holds data and runs it as a plain server (a single database growing into
      a cluster): it bootstraps the cluster with its data;
    - else data exists and no member runs: refused, naming the recovery command (which
      finds the member with the highest committed position)."""
    missing = [h for h in hosts if not isinstance(facts.get(h), dict)]
    if missing:
        said = "; ".join(f"{h}: {str(facts.get(h) or 'no answer').strip().splitlines()[-1]}" for h in missing)
        raise GaleraRefused(f"Galera: host(s) {', '.join(missing)} did not say what their mariadb holds ({said}); "
                            f"nothing was changed")
    alive = [h for h in hosts if facts[h]["state"] == "synced"]
    if alive:
        return None, alive + [h for h in hosts if h not in alive]
    holding = [h for h in hosts if facts[h]["data"]]
    if not holding:
        return hosts[0], list(hosts)
    if len(holding) == 1 and facts[holding[0]]["state"] == "standalone":
        return holding[0], holding + [h for h in hosts if h != holding[0]]
    states = ", ".join(f"{h}: {facts[h]['state']}" for h in holding)
    raise GaleraRefused(f"Galera: {', '.join(holding)} hold data and no member of the cluster is running "
                        f"({states}); bootstrapping one of them could lose rows another one committed, so "
                        f"nothing was changed. Run `{RECOVERY}`: it bootstraps from the member with the highest "
                        f"committed position and rejoins the others one at a time.")


def recovery_choice(positions, hosts):
    """The member to bootstrap from: the highest committed seqno among the hosts that
    hold data ({host: {data, uuid, seqno}}); ties go to the first host. Members of
    two different clusters (uuids) are refused: there is no one history to recover."""
    holding = [h for h in hosts if positions[h]["data"]]
    if not holding:
        raise GaleraRefused("mariadb-recovery: no member holds data; `deploy` bootstraps a new cluster")
    uuids = {positions[h]["uuid"] for h in holding} - {NO_UUID}
    if len(uuids) > 1:
        raise GaleraRefused("mariadb-recovery: the members hold data of different clusters ("
                            + ", ".join(f"{h}: {positions[h]['uuid']}" for h in holding)
                            + "); nothing was changed: choose by hand")
    return max(holding, key=lambda h: (positions[h]["seqno"], -hosts.index(h)))


# -- on a member's host ----------------------------------------------------------------
def _volume(client, spec):
    """The named volume the spec mounts as the datadir, or None before it exists."""
    import docker
    name = next((v.split(":")[0] for v in spec.volumes if v.split(":")[1] == DATADIR), None)
    if name is None:
        raise KollaError(f"{spec.name}: its spec mounts no volume at {DATADIR}")
    try:
        return client.volumes.get(name)
    except docker.errors.NotFound:
        return None


def _datadir(client, spec):
    volume = _volume(client, spec)
    return volume.attrs["Mountpoint"] if volume is not None else None


def holds_data(datadir):
    return bool(datadir) and (os.path.isdir(os.path.join(datadir, "mysql"))
                              or os.path.isfile(os.path.join(datadir, "grastate.dat")))


def query(container, sql):
    """The answer of `sql` in a running member, as the database's admin (tab-separated
    text), or None when it failed."""
    result = container.exec_run(["mariadb", "--defaults-file=/etc/mysql/kolla-client.cnf", "--batch",
                                 "--skip-column-names", "-e", sql])
    return result.output.decode(errors="replace").strip() if result.exit_code == 0 else None


def member(service):
    """The container of a mariadb service entry (pillar) that holds the datadir (beside
    it, on a cluster: its clustercheck, which has no volume)."""
    return next(c for c in service["containers"]
                if any(v.split(":")[1] == DATADIR for v in c["spec"].get("volumes", ())))


def spec_digest(service):
    """A digest of the member's spec in a mariadb service entry: two pillars that give
    it the same describe the same member (kolla_galera.held_facts)."""
    return hashlib.sha256(json.dumps(member(service)["spec"], sort_keys=True, default=str).encode()).hexdigest()[:16]


def _grastate(datadir):
    path = os.path.join(datadir or "", "grastate.dat")
    if not datadir or not os.path.isfile(path):
        return {}
    with open(path) as f:
        return parse_grastate(f.read())


def member_facts(client, spec):
    """What this host's member is: {data: whether its datadir holds a database,
    state: synced (in the primary component) | standalone (runs without Galera) |
    joining (runs, not synced) | down, grastate}."""
    import docker
    datadir = _datadir(client, spec)
    grastate = _grastate(datadir)
    state = "down"
    try:
        container = client.containers.get(spec.name)
    except docker.errors.NotFound:
        container = None
    if container is not None and container.status == "running":
        answer = query(container, "SELECT @@wsrep_on, IFNULL((SELECT VARIABLE_VALUE FROM information_schema."
                                   "GLOBAL_STATUS WHERE VARIABLE_NAME='WSREP_LOCAL_STATE_COMMENT'), ''), "
                                   "IFNULL((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE "
                                   "VARIABLE_NAME='WSREP_CLUSTER_STATUS'), '')")
        fields = (answer or "").split("\t")
        if len(fields) == 3:
            state = ("standalone" if fields[0] == "0" else
                     "synced" if fields[1:] == ["Synced", "Primary"] else "joining")
        else:
            state = "joining"
    return {"data": holds_data(datadir), "state": state, "grastate": grastate}


def mark_bootstrap(client, spec, on=True):
    """Leaves (or removes) the flag that makes this member's next start found the cluster."""
    datadir = _datadir(client, spec)
    if datadir is None:   # a new member: its volume is made now, as the container's would be
        from ..containers.manager import ContainerManager
        ContainerManager(client=client).ensure_volumes(spec)
        datadir = _datadir(client, spec)
    flag = os.path.join(datadir, BOOTSTRAP_FLAG)
    if on:
        open(flag, "w").close()
    elif os.path.exists(flag):
        os.unlink(flag)
    return on


def stop(client, spec):
    """Stops this host's member (a recovery starts them again in its order); True when it ran."""
    import docker
    try:
        container = client.containers.get(spec.name)
    except docker.errors.NotFound:
        return False
    was_running = container.status in ("running", "restarting")
    container.stop(timeout=spec.stop_timeout or 60)
    return was_running


def clear_datadir(client, spec):
    """Empties this stopped member's datadir, so that it joins its cluster by a full
    state transfer: after a restore on another member (kolla_salt.operations.backup) it holds rows
    the restored history does not have, and Galera would refuse it (its position ahead
    of the cluster's). Only the restore calls it, after the operator agreed and a
    backup of what it replaces was taken. Returns how many entries it removed."""
    import shutil
    container = client.containers.list(all=True, filters={"name": f"^{spec.name}$"})
    if container and container[0].status in ("running", "restarting"):
        raise KollaError(f"{spec.name} is running: its datadir is emptied only while it is stopped")
    datadir = _datadir(client, spec)
    entries = os.listdir(datadir) if datadir else []
    for entry in entries:
        path = os.path.join(datadir, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return len(entries)


def position(client, spec):
    """{data, uuid, seqno}: the last committed position of this member's datadir, from
    grastate.dat after a clean stop, else (seqno -1: a crash, or still running)
    recovered from InnoDB by mariadbd --wsrep-recover in a one-shot container
    (images/mariadb/kolla_galera_position)."""
    datadir = _datadir(client, spec)
    if not holds_data(datadir):
        return {"data": False, "uuid": NO_UUID, "seqno": -1}
    grastate = _grastate(datadir)
    if grastate.get("seqno", -1) != -1:
        return {"data": True, "uuid": grastate["uuid"], "seqno": grastate["seqno"]}
    volume = _volume(client, spec).name
    output = client.containers.run(spec.image, ["kolla_galera_position"], entrypoint=[], user="mysql",
                                   volumes={volume: {"bind": DATADIR, "mode": "rw"}}, network_mode="none",
                                   remove=True, stdout=True, stderr=False)
    return {"data": True, **json.loads(output.decode().strip().splitlines()[-1])}
