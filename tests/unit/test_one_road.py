"""The CLI is written once for one host and for many (the "structure" issue): it asks
the hosts only by the Road interface (kolla_salt.roads.road), chooses the road in one
place, and never asks which road it has."""
import ast
import inspect
import pathlib

import pytest

from kolla_salt.roads.master import Master
from kolla_salt.roads.road import Road
from kolla_salt.roads.saltcall import Here

CLI = pathlib.Path(__file__).resolve().parents[2] / "kolla_salt" / "cli"
# Where --master DIR / --lab NAME become args.road.
CHOOSER = ("__init__.py", "_choose_road")


def modules():
    return {path.name: ast.parse(path.read_text(), str(path)) for path in sorted(CLI.glob("*.py"))}


def is_args_road(node):
    return (isinstance(node, ast.Attribute) and node.attr == "road" and isinstance(node.value, ast.Name)
            and node.value.id == "args")


def road_names(tree):
    """Names bound to args.road (`road = args.road`)."""
    return {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and is_args_road(node.value)
            for target in node.targets if isinstance(target, ast.Name)}


def road_uses(tree):
    """(attribute, called) of every use of the road: args.road.X or ROAD.X."""
    names = road_names(tree)
    calls = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return [(node.attr, id(node) in calls) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and (is_args_road(node.value) or isinstance(node.value, ast.Name) and node.value.id in names)]


def test_no_command_asks_which_road_it_has():
    found = [f"{name}:{node.lineno}" for name, tree in modules().items() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr in ("master", "master_dir", "lab", "here")
             and isinstance(node.value, ast.Name) and node.value.id == "args"
             and not (name == CHOOSER[0] and node.lineno in chooser_lines())]
    assert not found, f"the CLI branches on the road outside {CHOOSER[1]}: {found}"


def chooser_lines():
    tree = modules()[CHOOSER[0]]
    chooser = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == CHOOSER[1])
    return range(chooser.lineno, chooser.end_lineno + 1)


def test_the_roads_are_named_only_where_one_is_chosen():
    found = [f"{name}:{node.lineno}" for name, tree in modules().items() for node in ast.walk(tree)
             if isinstance(node, (ast.Import, ast.ImportFrom))
             and {alias.name for alias in node.names} & {"Here", "Master", "saltcall"}
             and not (name == CHOOSER[0] and node.lineno in chooser_lines())]
    assert not found, f"a road is imported outside {CHOOSER[1]}: {found}"


def test_the_cli_calls_on_the_road_only_what_road_declares():
    attributes = {name for name in vars(Road) if not name.startswith("_")}
    declared = {name for name in attributes if callable(vars(Road)[name])}   # each road's or Road's own
    found = [f"{name}: {attr}" for name, tree in modules().items() for attr, called in road_uses(tree)
             if attr not in (declared if called else attributes)]
    assert not found, f"the CLI uses on the road what kolla_salt.roads.road.Road does not declare: {found}"
    assert any(road_uses(tree) for tree in modules().values())   # the walk sees the road at all


@pytest.mark.parametrize("road", [Here, Master])
def test_each_road_answers_every_method_with_its_parameters(road):
    road("/nonexistent")   # an abstract method left out: TypeError
    for name in Road.__abstractmethods__:
        wanted = inspect.signature(getattr(Road, name)).parameters
        given = inspect.signature(getattr(road, name)).parameters
        assert set(wanted) <= set(given), f"{road.__name__}.{name}{inspect.signature(getattr(road, name))}"


def test_one_host_reads_the_settings_again_only_when_globals_yml_changes(tmp_path, monkeypatch):
    """Every salt-call of a command asks for the state folder: the settings are composed
    once, and again after the command declared anew (a release rollback's globals.yml)."""
    from kolla_salt.declaration import settings as settings_module
    reads = []
    real = settings_module.load_settings
    monkeypatch.setattr(settings_module, "load_settings", lambda folder: reads.append(folder) or real(folder))
    (tmp_path / "globals.yml").write_text("openstack_release: '2026.1'\n")
    here = Here(str(tmp_path))
    assert here.settings["openstack_release"] == here.settings["openstack_release"] == "2026.1"
    assert len(reads) == 1
    (tmp_path / "globals.yml").write_text("openstack_release: '2026.2'\n")
    assert here.settings["openstack_release"] == "2026.2"
    assert len(reads) == 2
