#!/usr/bin/env bash
# The all-in-one deploy behind `make deploy`: operator files, images, deploy.
# Usage: scripts/deploy-aio.sh [--help]   (config folder: $KOLLA_SALT_CONFIG_DIR, default /etc/kolla-salt)
set -euo pipefail
if [ "${1:-}" = "--help" ]; then sed -n '2,3p' "$0" | sed 's/^# //'; exit 0; fi
cd "$(dirname "$0")/.."
CONFIG=${KOLLA_SALT_CONFIG_DIR:-/etc/kolla-salt}
KOLLA=".venv/bin/kolla-salt --config-dir $CONFIG"
mkdir -p "$CONFIG"
if [ ! -f "$CONFIG/globals.yml" ]; then
  cp pillar/examples/globals-aio.yml "$CONFIG/globals.yml"
  echo "[deploy] wrote $CONFIG/globals.yml (all-in-one on loopback; edit it to change anything)"
fi
$KOLLA genpwd
$KOLLA validate
$KOLLA build
$KOLLA deploy
echo
$KOLLA status
echo
if [ -f "$CONFIG/admin-openrc.sh" ]; then
  echo "Use the cloud:  . $CONFIG/admin-openrc.sh && .venv/bin/openstack token issue"
  echo "           or:  OS_CLIENT_CONFIG_FILE=$CONFIG/clouds.yaml .venv/bin/openstack --os-cloud kolla-admin project list"
fi
echo "Look around:    .venv/bin/kolla-salt status | logs CONTAINER | --help"
