"""Where things live: the checkout and the operator's files (host folders are
settings in globals.yml: kolla_state_directory, node_config_directory, ...)."""
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

