#!/usr/bin/env bash
# The whole suite behind `make test` and .ci/run. pytest's exit code 5 (no test
# collected) is a failure here: a suite that runs nothing proves nothing.
# Usage: scripts/run-tests.sh [--help] [PYTEST ARGS...]
set -uo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,4p' "$0" | sed 's/^# //'; exit 0; fi
cd "$(dirname "$0")/.."
.venv/bin/pytest -v -p no:cacheprovider "${@:-tests}"
rc=$?
if [ $rc -eq 5 ]; then echo "run-tests: pytest collected no tests" >&2; exit 1; fi
exit $rc
