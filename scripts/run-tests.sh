#!/usr/bin/env bash
# The whole suite behind `make test` and .ci/run (the lab's tests beside the rest); with
# PYTEST ARGS, pytest with those in one process. pytest's exit code 5 (no test
# collected) is a failure here: a suite that runs nothing proves nothing.
# Usage: scripts/run-tests.sh [--help] [PYTEST ARGS...]
set -uo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,5p' "$0" | sed 's/^# //'; exit 0; fi
cd "$(dirname "$0")/.."
# One suite at a time on a machine: two suites share the engine, the test
# prefixes and ports, and would break each other's containers.
exec 9>/run/lock/kolla-salt-suite.lock
if ! flock -n 9; then
    echo "run-tests: another suite runs on this machine; waiting for it to end" >&2
    flock 9
fi

# pytest ARGS...: its exit code, 1 for "no test collected". fd 9 (the lock) stays
# with this shell: a daemon a test leaks must not hold it. The 30 slowest steps are
# listed at the end: where the suite's time goes.
pytest_run() {
    .venv/bin/pytest -v -p no:cacheprovider --durations=30 "$@" 9>&-
    local rc=$?
    if [ $rc -eq 5 ]; then echo "run-tests: pytest collected no tests ($*)" >&2; return 1; fi
    return $rc
}
if [ $# -gt 0 ]; then pytest_run "$@"; exit $?; fi

# Everything: unit tests (pure logic), functional tests (real Docker engine,
# salt-call, the AIO cloud with the real openstack client, a real release upgrade),
# integration tests (real salt-master/minion: health loop, orchestrate, the 3-host
# lab). Images are built on first use (tens of minutes on a fresh machine).
# The lab's tests run beside the rest, in a process of their own: the lab's hosts are
# namespaces with engines of their own, so no name or port is shared, and while one
# process waits on its containers the other uses the CPU. Tests marked `quiet` run
# while the other process runs no test (tests/conftest.py). Each line is prefixed
# with its process.
export PYTHONUNBUFFERED=1
group() {   # NAME PYTEST-ARGS...
    local name=$1; shift
    pytest_run "$@" 2>&1 | sed -u "s/^/[$name] /"
    return "${PIPESTATUS[0]}"
}
DEFAULT=(tests/unit tests/functional tests/integration)
group lab -m lab "${DEFAULT[@]}" & lab=$!
group rest -m "not lab" "${DEFAULT[@]}" & rest=$!
wait $lab; lab_rc=$?
wait $rest; rest_rc=$?
echo "run-tests: the lab's tests exit code $lab_rc, the rest's $rest_rc"
[ $lab_rc -eq 0 ] && [ $rest_rc -eq 0 ]
