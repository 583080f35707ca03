"""Merging operator overrides into generated config files.

INI files (MySQL's option files, .cnf, too) are merged section by section and key
by key (an override wins, new sections and keys are added), YAML files are
deep-merged; anything else is
replaced by the override. Like kolla-ansible's merge_configs, but with errors
that name the file and line.
"""
import yaml

from .. import safeyaml
from ..errors import ValidationError

INI_SUFFIXES = (".conf", ".ini", ".cfg", ".cnf")
OPTION_FILE_SUFFIX = ".cnf"   # MySQL's: a key may stand alone (skip-name-resolve)
YAML_SUFFIXES = (".yaml", ".yml")


def parse_ini(text, where, bare_keys=False):
    """[(section, [(key, value)])] in file order; keys before any section go to DEFAULT.
    `bare_keys`: a line without '=' is a key without a value (None).

    Hand-rolled rather than configparser: keys keep their case and repeated
    keys (oslo.config multi-valued options) survive.
    """
    sections = {"DEFAULT": []}       # dicts keep insertion (file) order
    current = sections["DEFAULT"]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise ValidationError([f"{where}:{number}: malformed section header {raw!r}"])
            current = sections.setdefault(line[1:-1].strip(), [])
            continue
        if "=" not in line and not bare_keys:
            raise ValidationError([f"{where}:{number}: expected 'key = value', got {raw!r}"])
        key, equals, value = line.partition("=")
        current.append((key.strip(), value.strip() if equals else None))
    return [(name, items) for name, items in sections.items() if items or name != "DEFAULT"]


def merge_ini(base, override, where, bare_keys=False):
    merged = {name: list(items) for name, items in parse_ini(base, "(generated)", bare_keys)}
    order = list(merged)
    for name, items in parse_ini(override, where, bare_keys):
        if name not in merged:
            merged[name] = []
            order.append(name)
        override_keys = {key for key, _ in items}
        merged[name] = [(k, v) for k, v in merged[name] if k not in override_keys] + items
    out = []
    for name in order:
        if merged[name] or name != "DEFAULT":
            out.append(f"[{name}]")
            out.extend(key if value is None else f"{key} = {value}" for key, value in merged[name])
            out.append("")
    return "\n".join(out)


def deep_merge(base, override):
    if isinstance(base, dict) and isinstance(override, dict):
        result = dict(base)
        for key, value in override.items():
            result[key] = deep_merge(base[key], value) if key in base else value
        return result
    return override


def merge_yaml(base, override, where):
    try:
        data = safeyaml.load(override)
    except yaml.YAMLError as error:
        raise ValidationError([f"{where}: not valid YAML: {error}"])
    return yaml.safe_dump(deep_merge(safeyaml.load(base) or {}, data or {}), default_flow_style=False, sort_keys=False)


def merge(filename, base, override, where):
    """The generated `base` text of `filename` with the operator's `override` applied."""
    if filename.endswith(INI_SUFFIXES):
        return merge_ini(base, override, where, bare_keys=filename.endswith(OPTION_FILE_SUFFIX))
    if filename.endswith(YAML_SUFFIXES):
        return merge_yaml(base, override, where)
    return override
