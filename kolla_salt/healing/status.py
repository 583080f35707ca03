"""What runs now: the set tree with each managed container's state."""
from . import healthloop
from ..containers.manager import ContainerManager
from ..containers.spec import LABEL_GENERATION, LABEL_NAME, LABEL_SET
from ..declaration.tree import service_order


def collect(client, settings):
    """Rows in tree order: name, set, state, health, image, generation, kept generations.
    A swap that a killed command left unfinished is completed or undone first, so
    what it shows is what runs."""
    order = {f"{top}/{service}": index for index, (top, service) in enumerate(service_order())}
    manager = ContainerManager.from_settings(settings, client=client)
    manager.recover_interrupted()
    current, kept = [], {}
    for container in manager.deployment_containers(settings["container_name_prefix"]):
        name = container.labels[LABEL_NAME]
        if container.name != name:
            kept.setdefault(name, []).append(int(container.labels.get(LABEL_GENERATION, 0)))
            continue
        state = container.attrs["State"]
        current.append({
            "name": name, "set": container.labels.get(LABEL_SET, ""), "state": state["Status"],
            "health": (state.get("Health") or {}).get("Status", "none"),
            "image": container.attrs["Config"]["Image"],
            "generation": int(container.labels.get(LABEL_GENERATION, 0)),
            "started": state.get("StartedAt"),
        })
    for row in current:
        row["kept_generations"] = sorted(kept.get(row["name"], []))
    return sorted(current, key=lambda r: (order.get(r["set"], len(order)), r["name"]))


def health_loop(settings):
    """Whether this host's health loop runs, and per container its restarts and
    what its beacon last judged (healthy, failing, slow, unhealthy: health.HealthTracker)."""
    from .health import read_json
    pid = healthloop.running_pid(settings)
    restarts = {name: {"restarts": len(record.get("restarts", [])), "gave_up": bool(record.get("gave_up"))}
                for name, record in healthloop.ledger(settings).read().items()}
    # The beacon writes the file in this host's health daemon, or in its salt-minion
    # under a master (no daemon then); a judgement of an earlier incarnation is not shown.
    if settings["enable_health_loop"]:
        for name, seen in read_json(healthloop.status_file(settings)).items():
            restarts.setdefault(name, {"restarts": 0, "gave_up": False}).update(
                state=seen["status"], detail=seen.get("detail", ""), incarnation=seen.get("incarnation", ""))
    return {"running": pid is not None, "pid": pid, "enabled": settings["enable_health_loop"],
            "restarts": restarts}


def render(rows, loop, pins=()):
    lines = _tree_lines(rows, loop["restarts"]) if rows else ["no kolla-salt containers on this host"]
    lines.extend(f"pinned: {pin}" for pin in pins)
    lines.append(f"health loop: {'running (pid %d)' % loop['pid'] if loop['running'] else 'not running'}"
                 + ("" if loop["enabled"] else " (enable_health_loop: false)"))
    return "\n".join(lines)


def render_hosts(hosts, not_answering=None, pins=()):
    """Every host's tree, as a master sees them ({host: kolla_container.status}), and
    why the others did not answer ({host: reason})."""
    lines = []
    for host, found in sorted(hosts.items()):
        lines.append(f"== {host}")
        lines.extend(["  " + line for line in _tree_lines(found["containers"], found["health_loop"]["restarts"])]
                     if found["containers"] else ["  no kolla-salt containers"])
    lines.extend(f"== {host}\n  {reason}" for host, reason in sorted((not_answering or {}).items()))
    lines.extend(f"pinned: {pin}" for pin in pins)
    return "\n".join(lines)


def _tree_lines(rows, restarts_of):
    lines, last_top, last_set = [], None, None
    for row in rows:
        top, _, service = row["set"].partition("/")
        if top != last_top:
            lines.append(top or "(no set)")
            last_top, last_set = top, None
        if row["set"] != last_set:
            lines.append(f"  {service}")
            last_set = row["set"]
        kept = ",".join(map(str, row["kept_generations"])) or "-"
        lines.append(f"    {row['name']:<24} {row['state']:<9} {row['health']:<10} gen {row['generation']:<4} "
                     f"kept {kept:<8} {row['image']}{_loop_note(restarts_of.get(row['name'], {}), row)}")
    return lines


def _loop_note(loop, row):
    """What the health loop says of a container, when it says more than `healthy`.
    Its judgement of an earlier incarnation (before a restart) is no longer news."""
    notes = []
    current = loop.get("incarnation", "").endswith(f"@{row.get('started')}")
    if current and loop.get("state") in ("slow", "failing", "unhealthy"):
        why = {"slow": "slow: its check fails under host load; not restarted",
               "failing": "failing; stateful, not restarted without a certain hang"}.get(loop["state"], "unhealthy")
        notes.append(f"health loop: {why}")
    if loop.get("gave_up"):
        notes.append("health loop gave up; still watched")
    elif loop.get("restarts"):
        notes.append(f"health loop restarts: {loop['restarts']}")
    return f" ({'; '.join(notes)})" if notes else ""

