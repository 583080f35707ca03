"""The declared state (globals.yml, pins.yml): changed by a command only as a whole,
put back when the new declaration is refused."""
import contextlib
from pathlib import Path

import yaml

from .. import safeyaml
from ..errors import KollaError


def _declaration_files(config_dir):
    """{file: its text, None when absent} of the declared state (globals.yml, pins.yml),
    to put back when a command is refused (_undeclared)."""
    from ..declaration.pins import load_pins
    return {path: path.read_text() if path.exists() else None
            for path in (Path(config_dir) / "globals.yml", load_pins(config_dir).path)}


def _undeclared(config_dir, files):
    """Puts the declared state back as `files` (_declaration_files) held it."""
    now = _declaration_files(config_dir)
    changed = {file: text for file, text in files.items() if now[file] != text}
    for file, text in changed.items():
        if text is None:
            file.unlink(missing_ok=True)
        else:
            file.write_text(text)
    if changed:
        print(f"[declared] {', '.join(map(str, changed))}: taken back, as before this command")


@contextlib.contextmanager
def _declaring(args, check=None):
    """Changes the declared state: yields (the operator's globals.yml as a dict, the
    Pins) for the body to change, then writes both, printing what changed. If the
    new declaration does not pass `check()` (by default the road's validate), both
    files are put back and the error raised: a command refused leaves nothing
    changed."""
    from ..declaration.pins import load_pins
    config_dir = args.config_dir
    path = Path(config_dir) / "globals.yml"
    before = _declaration_files(config_dir)
    user_globals = (safeyaml.load(before[path]) if before[path] else None) or {}
    pins = load_pins(config_dir)
    old_globals, old_pins = dict(user_globals), pins.describe()
    yield user_globals, pins
    try:
        if user_globals != old_globals:
            for key in sorted(set(user_globals) | set(old_globals)):
                if user_globals.get(key) != old_globals.get(key):
                    print(f"[declared] {path}: {key}: {old_globals.get(key)!r} -> {user_globals.get(key)!r}")
            path.write_text(yaml.safe_dump(user_globals, default_flow_style=False, sort_keys=False))
        if pins.describe() != old_pins:
            pins.save()
            for line in pins.describe() or ["(no pins)"]:
                print(f"[declared] {pins.path}: {line}")
        (check or args.road.validate)()
    except BaseException:
        _undeclared(config_dir, before)
        raise


def _declare_rollback(args, key, target, rollback, facts):
    """Declares the rollback (pins.yml holds the container at generation `target`, what
    the good generation ran, with its `facts`: kolla_salt.declaration.pins.pin_facts) before swapping, so a
    rollback killed half-way is completed by the next deploy; a rollback that fails
    takes its pin back."""
    import datetime
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with _declaring(args) as (_, pins):
        before = pins.containers.get(key)
        pins.containers[key] = {"generation": target, "why": f"rollback, {when}", **facts}
    try:
        target, new = rollback()
    except KollaError:
        with _declaring(args) as (_, pins):
            if before is None:
                pins.containers.pop(key)
            else:
                pins.containers[key] = before
        raise
    print(f"[rollback] {key}: generation {new} runs what generation {target} ran")
