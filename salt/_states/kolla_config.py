"""State module: kolla_config.present writes a container's config folder.

Changes name the files, never their contents (they hold secrets)."""
from kolla_salt.containers.configfiles import plan_folder, write_folder


def present(name, files):
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    changes = plan_folder(name, files)
    if not changes:
        ret["comment"] = f"{name} is up to date"
    elif __opts__["test"]:
        ret.update(result=None, changes=changes, comment=f"{name} would be updated")
    else:
        ret.update(changes=write_folder(name, files), comment=f"{name} updated")
    return ret
