"""Runner: the key repositories on a master (kolla_salt.operations.keys), for the
orchestration kolla.rotate_keys (what `kolla-salt rotate-keys` runs through a master).

    salt-run kolla_keys.rotating
    salt-run kolla_keys.rotate [services=LIST]

`rotating`: the services placed on some host whose keys rotate (what the rotation's
deploy walks). `rotate`: the operator folder's repositories of those services
rotated, once every host that runs them holds the current keys in its volume;
refused otherwise, naming the hosts, with nothing changed."""
from kolla_salt.roads.rollout import ask


def _placed(services=None):
    """{service: the hosts it runs on} of the placement (kolla_salt.declaration.roles)."""
    from kolla_salt.declaration.roles import placement
    return {step["service"]: __salt__["kolla_rollout.hosts"](step["target"])
            for step in placement(__opts__["kolla_config_dir"]) if not services or step["service"] in services}


def rotating():
    from kolla_salt.operations import keys
    return keys.rotating_services(_placed())


def rotate(services=None):
    """{"note": what was rotated}, or {"error": why not} (the runner's retcode set)."""
    import salt.client

    from kolla_salt.declaration.settings import load_settings
    from kolla_salt.errors import KollaError
    from kolla_salt.operations import keys
    config_dir = __opts__["kolla_config_dir"]
    client = salt.client.get_local_client(mopts=__opts__)
    try:
        said = keys.rotate(config_dir, load_settings(config_dir)["container_name_prefix"], _placed(services),
                           lambda hosts, volume: ask(client, hosts, "kolla_keys.digest", [volume]))
    except KollaError as refused:
        __context__["retcode"] = 1
        return {"error": str(refused)}
    return {"note": "; ".join(said) or "no repository rotates"}
