"""The suite's own layout: what would stop `make test` before any test runs."""
import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent


def test_no_two_test_modules_share_a_name():
    # tests/ has no packages, so pytest imports each module by its bare name:
    # a second test_x.py anywhere fails the whole collection ("import file
    # mismatch"), and with it CI, before a single test runs.
    where = collections.defaultdict(list)
    for module in TESTS.rglob("test_*.py"):
        where[module.name].append(str(module.relative_to(TESTS)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"test modules sharing a name: {shared}"
