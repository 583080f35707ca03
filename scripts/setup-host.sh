#!/usr/bin/env bash
# Prepares this host for kolla-salt: the project's virtualenv, the Docker
# engine, debootstrap and the lab's registry and skopeo. Idempotent: a second run prints nothing but "ready".
# Usage: [KOLLA_SALT_INSECURE_REGISTRY=host:port] scripts/setup-host.sh [--help]
set -euo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

cd "$(dirname "$0")/.."
LOG_DIR=/var/log/kolla-salt
VENV=${KOLLA_SALT_VENV:-.venv}
PYTHON=${PYTHON:-python3}
mkdir -p "$LOG_DIR"

did=0
step() { did=1; printf '[setup] %s\n' "$*"; }

need_pkgs=()
[ -x /usr/sbin/dockerd ] || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
# Tests: hosts on an Open vSwitch bridge ping each other.
command -v ping >/dev/null 2>&1 || need_pkgs+=(iputils-ping)
# The lab (`kolla-salt lab`): a registry its hosts pull from, skopeo to push to it.
command -v docker-registry >/dev/null 2>&1 || need_pkgs+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need_pkgs+=(skopeo)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  step "installing ${need_pkgs[*]} (apt-get, log in $LOG_DIR/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >"$LOG_DIR/apt.log" 2>&1
  apt-get install -y --no-install-recommends "${need_pkgs[@]}" >>"$LOG_DIR/apt.log" 2>&1
fi

stamp="$VENV/.kolla-salt-installed"
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ]; then
  step "installing Python packages into $VENV (log in $LOG_DIR/pip.log)"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >"$LOG_DIR/pip.log" 2>&1 || true
  "$VENV/bin/pip" install -e '.[test,client]' >>"$LOG_DIR/pip.log" 2>&1
  touch "$stamp"
fi

docker_ok() { "$VENV/bin/python" -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1; }
if ! docker_ok; then
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    step "starting docker (systemd)"
    systemctl start docker
  else
    # No init system here: run the daemon ourselves, detached from this shell.
    step "starting dockerd in the background (log in $LOG_DIR/dockerd.log)"
    rm -f /var/run/docker.pid
    setsid /usr/sbin/dockerd >>"$LOG_DIR/dockerd.log" 2>&1 < /dev/null &
  fi
  for _ in $(seq 1 60); do docker_ok && break; sleep 1; done
  docker_ok || { echo "[setup] the Docker engine did not answer within 60 s; see $LOG_DIR/dockerd.log" >&2; exit 1; }
fi
# A registry without TLS (the master's, on Vagrant VMs): hosts pull from it once the
# engine lists it in insecure-registries, a setting dockerd reloads on SIGHUP.
registry=${KOLLA_SALT_INSECURE_REGISTRY:-}
if [ -n "$registry" ] && ! grep -qs "\"$registry\"" /etc/docker/daemon.json; then
  step "the engine pulls from $registry without TLS (/etc/docker/daemon.json)"
  "$VENV/bin/python" - "$registry" <<'PY'
import json, pathlib, sys
path = pathlib.Path("/etc/docker/daemon.json")
config = json.loads(path.read_text()) if path.exists() else {}
config["insecure-registries"] = sorted(set(config.get("insecure-registries", [])) | {sys.argv[1]})
path.parent.mkdir(exist_ok=True)
path.write_text(json.dumps(config, indent=2) + "\n")
PY
  kill -HUP "$(cat /var/run/docker.pid)"
fi
[ "$did" = 0 ] || step "ready"
