"""A Salt state run's return as the operator reads it: what changed, what failed.
The same on one host (salt-call) and through a master (each host's part)."""


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
