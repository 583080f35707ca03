"""Writing and reading a container's rendered config folder (files 0600, folder 0700).

Reports which files changed by name only: their contents hold secrets.
"""
import os
from pathlib import Path

from ..private import write_private


def plan_folder(folder, files):
    """{'added'|'changed'|'removed': [names]} that writing `files` into `folder` would do."""
    folder = Path(folder)
    current = {}
    if folder.is_dir():
        current = {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}
    return plan_changes(current, files)


def plan_changes(current, files):
    """{'added'|'changed'|'removed': [names]} from a folder holding `current` to `files`."""
    changes = {
        "added": sorted(set(files) - set(current)),
        "changed": sorted(n for n in files if n in current and current[n] != files[n]),
        "removed": sorted(set(current) - set(files)),
    }
    return {k: v for k, v in changes.items() if v}


def write_folder(folder, files):
    changes = plan_folder(folder, files)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    for name in changes.get("added", []) + changes.get("changed", []):
        write_private(folder / name, files[name])
    for name in changes.get("removed", []):
        (folder / name).unlink()
    return changes


def read_config_files(config_dir):
    """{relative path: text} of a rendered config folder (empty if none)."""
    files = {}
    if config_dir and os.path.isdir(config_dir):
        for root, _, names in os.walk(config_dir):
            for name in names:
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(path, config_dir)] = f.read()
    return files
