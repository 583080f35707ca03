"""Safe YAML loading through libyaml's parser where PyYAML has it (CSafeLoader):
the same documents and errors as yaml.safe_load, about twenty times faster. Every
pillar parses each service's rendered definition, its keys and its images' files:
with the pure-Python parser that was most of a pillar's build time, paid on every
salt-call and on the master for every minion of every step."""
import copy
from pathlib import Path

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# {path: (its text when parsed, its document)}: see load_file.
_PARSED = {}


def load(text):
    """yaml.safe_load(text), faster."""
    return yaml.load(text, Loader=LOADER)


def load_file(path):
    """The document of the YAML file `path`, parsed again only when its text changed:
    a pillar's build reads the checkout's definitions (image.yml, settings.yml,
    keys.yaml, tree.yaml, releases.yml) from several of its parts, and a master's
    worker builds a pillar for every minion of every step. The text is compared, not
    the file's size and times: two writes of one length can keep those where file
    times are coarse. The caller gets a copy of its own, free to change.
    FileNotFoundError and yaml.YAMLError as load's."""
    text = Path(path).read_text()
    found = _PARSED.get(str(path))
    if found is None or found[0] != text:
        found = _PARSED[str(path)] = (text, load(text))
    return copy.deepcopy(found[1])
