{#- Orchestrated restore of the database across hosts (kolla-salt mariadb-restore
    through a master does this):
        salt-run state.orchestrate kolla.restore pillar='{"kolla_restore": {"backup": NAME, "host": HOST}}'
    HOST: the minion whose member holds backup NAME (`kolla-salt mariadb-backup --list`).
    A backup of what it replaces, the writers and members stopped, NAME put into
    HOST's member, the cluster founded again from it, then kolla.deploy starts the
    writers (kolla/orchestrate.jinja, restore). The CLI checks first what a restore
    forgets and asks; a direct run does not. Pillar `kolla_command`: what asked, said in
    the backup's reason. -#}
{%- from "kolla/orchestrate.jinja" import restore %}
{{ restore("kolla-restore", pillar.kolla_restore, pillar.get("kolla_command", "salt-run state.orchestrate kolla.restore")) }}
