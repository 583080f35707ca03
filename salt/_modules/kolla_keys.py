"""Execution module: what this host's key volumes hold, as digests (kolla_salt.operations.keys),
for `kolla-salt rotate-keys`: a repository is rotated only once every host has it."""
__virtualname__ = "kolla_keys"


def __virtual__():
    return __virtualname__


def digest(volume):
    """The digest of the keys the volume holds (None: it does not exist or is empty)."""
    import docker

    from kolla_salt.operations import keys
    found = keys.volume_keys(docker.from_env(timeout=120), volume)
    return keys.digest(found) if found else None
