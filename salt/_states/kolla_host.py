"""State module: kolla_host.running_value sets a kernel setting's running value
(/proc/sys) and nothing else: no sysctl.conf line, no shell (cmd.run's `unless`
cost a minion 4 s of every state run, half of a no-op deploy through a master)."""
import os


def running_value(name, value):
    """`name` in sysctl's dotted form (net.ipv4.tcp_migrate_req); a kernel without it
    is left alone (the comment says so)."""
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    path = os.path.join("/proc/sys", *name.split("."))
    if not os.path.exists(path):
        ret["comment"] = f"{name}: this kernel has no such setting; left alone"
        return ret
    with open(path) as current:
        old = current.read().strip()
    if old == str(value):
        ret["comment"] = f"{name} is {value}"
        return ret
    ret["changes"] = {name: {"old": old, "new": str(value)}}
    if __opts__["test"]:
        ret.update(result=None, comment=f"{name} would be {value}")
    else:
        with open(path, "w") as setting:
            setting.write(str(value))
        ret["comment"] = f"{name} set to {value}"
    return ret
