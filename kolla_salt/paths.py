"""Where things live: the checkout, the operator's files and host state.

Every location can be moved with an environment variable so that tests and
benchmarks run beside a real deployment without touching it.
"""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO / "images"
STATES_DIR = REPO / "salt" / "states"
SERVICES_DIR = STATES_DIR / "kolla"
PILLAR_DIR = REPO / "pillar"
DEFAULTS_DIR = PILLAR_DIR / "defaults"


def config_dir():
    """The operator's directory: globals.yml, passwords.yml, config/, clouds.yaml."""
    return Path(os.environ.get("KOLLA_SALT_CONFIG_DIR", "/etc/kolla-salt"))


def state_dir():
    """Host state kept by kolla-salt: generation history, config snapshots."""
    return Path(os.environ.get("KOLLA_SALT_STATE_DIR", "/var/lib/kolla-salt"))
