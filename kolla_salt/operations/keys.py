"""Key repositories (keystone's fernet and credential keys): kept in the operator
folder, the same on every host that runs the service, written into its volumes.

A service folder declares its repositories in `keys.yaml` (read, not rendered):

    fernet: {volume: keystone_fernet_keys, owner: keystone, rotate: 3}
    credential: {volume: keystone_credential_keys, owner: keystone}

`owner` names the image whose user owns the keys (images/<owner>/image.yml `user`):
the uid is declared once, where the image makes the user.

The operator folder holds `keys/<service>/<name>/<index>` (folders 0700, files
0600) in keystone's own layout: 0 is the staged key (decrypts, not yet used to
encrypt), the highest index the primary (encrypts), the others secondary.
`kolla-salt genpwd` makes missing repositories (adopting what a volume on this
host already holds); `kolla-salt rotate-keys` rotates those with `rotate: N` (N
keys kept), once every host has the current ones: a key becomes primary only
after it was distributed as the staged one ("distribute before use"). A
repository without `rotate` (credentials: they encrypt data in the database) is
never changed once written: a volume holding other keys is refused, not replaced.
Key contents never appear in a change report or an error: only file names and
digests do."""
import base64
import binascii
import hashlib
import os
import shutil
from pathlib import Path

from .. import paths, safeyaml
from ..containers.configfiles import plan_changes, write_folder
from ..errors import KollaError, ValidationError

KEYS_FILE = "keys.yaml"


class KeyConflict(KollaError):
    """A volume holds keys that must not be replaced."""


def declared(images=None):
    """{service: {repository: {volume, owner (a uid), rotate}}} of every service folder
    (`images`: kolla_salt.images.build.discover's, when the caller has them)."""
    from ..images.build import discover
    users = {name: image.user["uid"] for name, image in (images or discover()).items() if image.user}
    found, problems = {}, []
    for path in sorted(paths.SERVICES_DIR.glob(f"*/{KEYS_FILE}")):
        where = f"salt/states/kolla/{path.parent.name}/{KEYS_FILE}"
        data = safeyaml.load_file(path) or {}
        for name, entry in data.items():
            entry = entry if isinstance(entry, dict) else {}
            if not isinstance(entry.get("volume"), str) or entry.get("owner") not in users:
                problems.append(f"{where}: key '{name}' needs volume (a name) and owner (an image whose image.yml "
                                f"names its user: {', '.join(sorted(users))})")
            elif not isinstance(entry.get("rotate", 2), int) or entry.get("rotate", 2) < 2:
                problems.append(f"{where}: key '{name}.rotate' must be the number of keys kept (2 or more)")
            else:
                data[name] = {**entry, "owner": users[entry["owner"]]}
        found[path.parent.name] = data
    if problems:
        raise ValidationError(problems)
    return found


def repository_path(config_dir, service, name):
    return Path(config_dir) / "keys" / service / name


def new_key():
    """A fernet key: 32 random bytes, URL-safe base64 (what keystone-manage writes)."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def new_repository():
    """A staged key (0) and a primary one (1), as keystone-manage fernet_setup makes."""
    return {"0": new_key(), "1": new_key()}


def valid_key(text):
    try:
        return len(base64.urlsafe_b64decode(text.encode())) == 32
    except (binascii.Error, ValueError):
        return False


def load(folder):
    """{index: key} of a repository folder; a missing, empty or malformed one is
    refused naming the file (never what it holds)."""
    folder = _settle(Path(folder))
    if not folder.is_dir():
        raise ValidationError([f"{folder}: missing; run `kolla-salt genpwd` to make it"])
    keys, problems = {}, []
    for path in sorted(folder.iterdir()):
        text = path.read_text().strip() if path.is_file() else ""
        if not path.name.isdigit():
            problems.append(f"{path}: not a key's index (a key repository holds files 0, 1, 2, ...)")
        elif not valid_key(text):
            problems.append(f"{path}: not a fernet key (32 bytes, URL-safe base64)")
        else:
            keys[path.name] = text
    if not problems and ("0" not in keys or len(keys) < 2):
        problems.append(f"{folder}: needs a staged key (0) and a primary one (the highest index)")
    if problems:
        raise ValidationError(problems)
    return keys


def rotated(keys, keep):
    """keystone's rotation: the staged key (0) becomes the primary one (the next
    index), a new key is staged, and the oldest secondary keys go beyond `keep`."""
    indexes = sorted(int(i) for i in keys if i != "0")
    new = {str(i): keys[str(i)] for i in indexes}
    new[str(indexes[-1] + 1)] = keys["0"]
    new["0"] = new_key()
    for index in indexes:
        if len(new) <= keep:
            break
        del new[str(index)]
    return new


def rotating_services(placed):
    """The services of `placed` (those running on some host) with a repository that
    rotates: what `rotate-keys` deploys once it rotated them."""
    return sorted(service for service, repositories in declared().items()
                  if service in placed and any("rotate" in entry for entry in repositories.values()))


def rotate(config_dir, prefix, placed, held):
    """rotate-keys' change (on one host before its deploy's salt-call, through a master
    the runner kolla_keys.rotate): each repository that rotates of a service `placed`
    on hosts ({service: [hosts]}; None: this host) is rotated and saved, once every
    one of those hosts holds its current keys in its volume (`held(hosts, volume)`:
    {host: digest}): the key made primary must have been on every host as the staged
    one ("distribute before use"). Refused before any file changes, naming the hosts
    that do not. Lines saying what changed."""
    rotating = []
    for service, repositories in declared().items():
        hosts = placed.get(service) or []
        for name, entry in repositories.items():
            if "rotate" not in entry or not hosts:
                continue
            path = repository_path(config_dir, service, name)
            current, volume = load(path), prefix + entry["volume"]
            found = held(hosts, volume)
            behind = [host or "this host" for host in hosts if found.get(host) != digest(current)]
            if behind:
                raise KollaError(f"{path}: not rotated: {', '.join(behind)} do(es) not hold these keys in {volume} "
                                 f"yet (or did not answer); run `kolla-salt deploy` first, so the key made primary is "
                                 f"on every host before it is used; nothing was changed")
            rotating.append((path, rotated(current, entry["rotate"])))
    said = []
    for path, new in rotating:
        save(path, new)
        said.append(f"{path}: key {max(map(int, new))} is the primary one now, a new key is staged, {len(new)} kept")
    return said


def digest(keys):
    """A digest of a repository's names and keys (not a secret: compared across hosts)."""
    h = hashlib.sha256()
    for name in sorted(keys):
        h.update(f"{name}\0{keys[name].strip()}\0".encode())
    return h.hexdigest()[:16]


def save(folder, keys):
    """Writes the repository atomically: a new folder beside it, then renames. A
    process killed in between leaves one complete repository (_settle picks it)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    new, old = folder.with_name(f".{folder.name}.new"), folder.with_name(f".{folder.name}.old")
    shutil.rmtree(new, ignore_errors=True)
    write_folder(new, {name: key + "\n" for name, key in keys.items()})
    if folder.exists():
        os.rename(folder, old)
    os.rename(new, folder)
    shutil.rmtree(old, ignore_errors=True)


def _settle(folder):
    """Finishes or forgets a save() that was killed: a complete new folder is only
    left without the old one beside it."""
    new, old = folder.with_name(f".{folder.name}.new"), folder.with_name(f".{folder.name}.old")
    if not folder.exists() and new.is_dir():
        os.rename(new, folder)
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return folder


# -- on a host: the volumes ---------------------------------------------------------
def volume_folder(client, volume, create=False):
    """The host folder of a named volume (created with an id, as the containers'
    volumes are, when `create`); None when it does not exist."""
    from ..containers.engine import create_volume
    import docker.errors
    try:
        return Path(client.volumes.get(volume).attrs["Mountpoint"])
    except docker.errors.NotFound:
        if not create:
            return None
        return Path(create_volume(client, volume).attrs["Mountpoint"])


def volume_keys(client, volume):
    """{index: key} a volume holds ({} when it does not exist)."""
    folder = volume_folder(client, volume)
    if folder is None or not folder.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in folder.iterdir() if p.is_file()}


def plan_volume(client, volume, keys, replace):
    """{'added'|'changed'|'removed': [indexes]} that writing `keys` would do; a volume
    whose keys may not be replaced (`replace` false) and differ is refused."""
    changes = plan_changes(volume_keys(client, volume), keys)
    if not replace and (changes.get("changed") or changes.get("removed")):
        raise KeyConflict(
            f"volume {volume} holds keys other than the declared ones ({', '.join(changes.get('changed', []) + changes.get('removed', []))}): "
            f"data encrypted with them would become unreadable. Copy that volume's files into the operator "
            f"folder's repository (keys/<service>/<name>/) if they are the ones in use, else remove the volume")
    return changes


def write_volume(client, volume, keys, owner, replace):
    """Writes `keys` into the volume (its files 0600 and folder 0700, owned by the
    uid `owner`); returns the changes by index only."""
    changes = plan_volume(client, volume, keys, replace)
    if changes:
        folder = volume_folder(client, volume, create=True)
        write_folder(folder, {name: key + "\n" for name, key in keys.items()})
        for path in [folder, *folder.iterdir()]:
            os.chown(path, owner, owner)
    return changes
