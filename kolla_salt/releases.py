"""The table of known OpenStack releases (pillar/defaults/releases.yml)."""
import yaml

from . import paths


def load_releases():
    """{release: {series, binary, source: {project: version}}}, oldest first."""
    return yaml.safe_load((paths.DEFAULTS_DIR / "releases.yml").read_text())
