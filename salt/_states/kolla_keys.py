"""State module: kolla_keys.present writes a key repository into a volume
(kolla_salt.operations.keys). Changes name the key files, never their contents."""
from kolla_salt.errors import KollaError


def present(name, keys, owner, replace=True):
    """The volume `name` holds exactly `keys` ({index: key}), owned by uid `owner`;
    with replace=False a volume holding other keys is refused, not changed."""
    import docker

    from kolla_salt.operations import keys as repository
    ret = {"name": name, "result": False, "changes": {}, "comment": ""}
    try:
        client = docker.from_env(timeout=120)
        changes = repository.plan_volume(client, name, keys, replace)
        if not changes:
            ret.update(result=True, comment=f"volume {name} holds the declared keys")
        elif __opts__["test"]:
            ret.update(result=None, changes=changes, comment=f"volume {name}: its keys would be written")
        else:
            ret.update(result=True, changes=repository.write_volume(client, name, keys, owner, replace),
                       comment=f"volume {name}: keys written")
    except KollaError as error:
        ret["comment"] = str(error)
    return ret
