"""What runs now: the set tree with each managed container's state."""
from .inventory import service_order
from .spec import LABEL_GENERATION, LABEL_NAME, LABEL_SET


def collect(client, settings):
    """Rows in tree order: name, set, state, health, image, generation, kept generations."""
    prefix = settings["container_name_prefix"]
    order = {f"{top}/{service}": index for index, (top, service) in enumerate(service_order())}
    current, kept = [], {}
    for container in client.containers.list(all=True, filters={"label": LABEL_NAME}):
        name = container.labels[LABEL_NAME]
        if not name.startswith(prefix):
            continue
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




def render(rows):
    if not rows:
        return "no kolla-salt containers on this host"
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
                     f"kept {kept:<8} {row['image']}")
    return "\n".join(lines)
