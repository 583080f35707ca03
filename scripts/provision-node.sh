#!/usr/bin/env bash
# Makes a host a kolla-salt salt-master or salt-minion and runs the daemon in the
# foreground. The lab (`kolla-salt lab up`) runs it inside each host's namespaces;
# the Vagrantfile runs it on each VM (under systemd-run) after scripts/setup-host.sh.
# Usage: scripts/provision-node.sh master|minion --id ID --root DIR [options of python -m kolla_salt.roads.node]
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ] || [ $# -eq 0 ]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
exec "${KOLLA_SALT_VENV:-.venv}/bin/python" -m kolla_salt.roads.node "$@"
