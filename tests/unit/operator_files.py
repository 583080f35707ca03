"""An operator folder's secrets for unit tests that build pillars: passwords.yml
(every wanted key, mode 0600) and the key repositories `kolla-salt genpwd` makes."""
import yaml

from kolla_salt.declaration.settings import wanted_passwords
from kolla_salt.operations import keys


def write_secrets(folder, value=lambda key: f"pw-{key}"):
    wanted = wanted_passwords()
    path = folder / "passwords.yml"
    path.write_text(yaml.safe_dump({k: value(k) for k in wanted}))
    path.chmod(0o600)
    for service, repositories in keys.declared().items():
        for name in repositories:
            keys.save(keys.repository_path(folder, service, name), keys.new_repository())
