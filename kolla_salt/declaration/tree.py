"""The container-set tree: tree.yaml's sets in deploy and upgrade order, each holding
the services whose folder names it (docs/design.md, "The container-set tree")."""
from .. import paths
from ..errors import ValidationError
from .settings import read_yaml, service_declarations, type_name


def load_tree():
    """[(top-level set, [service, ...])] in deploy order; a broken tree.yaml is an error."""
    return [(entry["name"], entry["services"]) for entry in tree_entries()]


TREE_KEYS = ("name", "after", "parallel")


def set_members(names, problems):
    """{set: its services in order}: each service folder's settings.yml names its `set`
    (one of `names`) and the services of that set it comes `after`; the others of a set
    keep the order of their names."""
    problems.extend(f"{folder / 'settings.yml'}: missing: a service's folder names its set there"
                    for folder in sorted(d.parent for d in paths.SERVICES_DIR.glob("*/service.yaml"))
                    if not (folder / "settings.yml").exists())
    declared = {}
    for path, declaration in service_declarations(problems):
        service, top, after = path.parent.name, declaration.get("set"), declaration.get("after", [])
        if top not in names:
            problems.append(f"{path}: key 'set' must name a set of tree.yaml ({', '.join(names)}), got {top!r}")
        elif not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            problems.append(f"{path}: key 'after' must be a list of services of its set, got {after!r}")
        else:
            declared[service] = (path, top, after)
    members = {name: [] for name in names}
    for top in names:
        waiting = {service: set(after) for service, (_, in_set, after) in declared.items() if in_set == top}
        for service, after in waiting.items():
            problems.extend(f"{declared[service][0]}: key 'after': '{a}' is not a service of set {top} "
                            f"({', '.join(sorted(waiting))})" for a in sorted(after - set(waiting)))
            after &= set(waiting)
        while waiting:
            ready = sorted(service for service, after in waiting.items() if not after & set(waiting))
            if not ready:
                problems.append(f"{top}: the services' `after` make a cycle: {', '.join(sorted(waiting))}")
                break
            members[top].append(ready[0])
            del waiting[ready[0]]
    return members


def tree_entries():
    """tree.yaml's sets in deploy order, each {name, services (those whose folder
    names the set), after (the sets it starts after: those it names, else the one
    before it), parallel}, validated: a set starts only after sets before it, so the
    tree's order stays one a walk may keep."""
    problems = []
    where = paths.SERVICES_DIR / "tree.yaml"
    entries, seen = [], []
    for index, raw in enumerate(read_yaml(where, problems, kind=list)):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            problems.append(f"{where}: set #{index + 1}: expected a mapping with a name, got {raw!r}")
            continue
        name = raw["name"]
        problems.extend(f"{where}: {name}.{key}: not a key of a set (keys: {', '.join(TREE_KEYS)})"
                        for key in raw if key not in TREE_KEYS)
        after = raw.get("after", seen[-1:])
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            problems.append(f"{where}: {name}.after: expected a list of set names, got {type_name(after)}")
            after = []
        problems.extend(f"{where}: {name}.after: '{a}' is not a set before it (sets before it: "
                        f"{', '.join(seen) or 'none'})" for a in after if a not in seen)
        entries.append({"name": name, "after": after, "parallel": bool(raw.get("parallel"))})
        seen.append(name)
    members = set_members(seen, problems)
    if problems:
        raise ValidationError(problems)
    return [{**entry, "services": members[entry["name"]]} for entry in entries]


def waits(here):
    """{service: the services of `here` (those this host runs) whose deploy it waits
    for}: every service of the sets its set starts after (and theirs, transitively),
    and the services before it in its own set unless that set is `parallel`. Salt runs
    what waits for nothing unfinished side by side (salt/states/kolla/service.jinja)."""
    entries = tree_entries()
    before = {}   # set name -> every set it starts after, transitively
    for entry in entries:
        before[entry["name"]] = set(entry["after"]).union(*(before[a] for a in entry["after"]))
    members = {entry["name"]: [s for s in entry["services"] if s in here] for entry in entries}
    found = {}
    for entry in entries:
        earlier = [s for name in before[entry["name"]] for s in members[name]]
        for index, service in enumerate(members[entry["name"]]):
            own = [] if entry["parallel"] else members[entry["name"]][:index]
            found[service] = [s for s in here if s in earlier or s in own]
    return found


def in_set(set_path, name):
    """Whether a container or service whose set path is `set_path` (e.g.
    database-control/mariadb) belongs to the set `name`: a top-level set, a
    service, or the whole path."""
    return set_path == name or set_path.startswith(name + "/") or set_path.endswith("/" + name)


def all_services(hosts):
    """Every host's services (each once, in deploy order) of {host: {"services": its
    entries}} (a declaration): what a name is checked against and what a release
    rollback stops first."""
    order = {service: index for index, (_, service) in enumerate(service_order())}
    services = {s["name"]: s for declared in hosts.values() for s in declared["services"]}
    return sorted(services.values(), key=lambda s: order[s["name"]])


def service_order():
    return [(top, service) for top, services in load_tree() for service in services]
