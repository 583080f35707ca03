{#- Orchestrated release rollback across hosts (kolla-salt rollback --release through
    a master does this, after declaring RELEASE in globals.yml):
        salt-run state.orchestrate kolla.rollback_release pillar='{"kolla_release": "RELEASE"}'
    After an upgrade from RELEASE, with openstack_release: RELEASE declared for every
    service: the database as the newest backup taken under RELEASE holds it (an upgrade
    takes one before its migrations), then every container at RELEASE. Pillar
    `kolla_restore` ({backup, host, first}) gives the plan the CLI chose; without it
    the runner kolla_galera.rollback_plan chooses the same (kolla_salt.operations.backup.rollback_plan)
    and refuses when RELEASE is not declared or no backup fits. Pillar `kolla_command`:
    what asked, said in the backup's reason. -#}
{%- from "kolla/orchestrate.jinja" import restore %}
{%- set release = pillar.get("kolla_release") %}
{%- set plan = pillar.get("kolla_restore") or (salt["saltutil.runner"]("kolla_galera.rollback_plan", release=release)
                                              if release else {"error": "pillar kolla_release: the release to go back to"}) %}
{{ restore("kolla-rollback", plan, pillar.get("kolla_command", "salt-run state.orchestrate kolla.rollback_release"),
           allow_jump="the database went back to backup " ~ plan.get("backup")) }}
