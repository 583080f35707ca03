#!/usr/bin/env bash
# The whole suite behind `make test` and .ci/run. pytest's exit code 5 (no test
# collected) is a failure here: a suite that runs nothing proves nothing.
# Usage: scripts/run-tests.sh [--help] [PYTEST ARGS...]
set -uo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,4p' "$0" | sed 's/^# //'; exit 0; fi
cd "$(dirname "$0")/.."
# Everything: unit tests (pure logic), functional tests (real Docker engine,
# salt-call, the AIO cloud with the real openstack client, a real release
# upgrade), integration tests (real salt-master/minion: health loop, orchestrate).
# Images are built on first use (tens of minutes on a fresh machine).
DEFAULT=(tests/unit tests/functional tests/integration)
# One suite at a time on a machine: two suites share the engine, the test
# prefixes and ports, and would break each other's containers.
exec 9>/run/lock/kolla-salt-suite.lock
if ! flock -n 9; then
    echo "run-tests: another suite runs on this machine; waiting for it to end" >&2
    flock 9
fi
if [ $# -gt 0 ]; then set -- "$@"; else set -- "${DEFAULT[@]}"; fi
# fd 9 (the lock) stays with this shell: a daemon a test leaks must not hold it.
# The 30 slowest steps are listed at the end: where the suite's time goes.
.venv/bin/pytest -v -p no:cacheprovider --durations=30 "$@" 9>&-
rc=$?
if [ $rc -eq 5 ]; then echo "run-tests: pytest collected no tests" >&2; exit 1; fi
exit $rc
