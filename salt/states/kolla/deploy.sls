{#- On a minion (salt-call, or salt HOST state.apply kolla.deploy): deploys every
    service enabled for this host, in container-set tree order (pillar kolla:services
    is already in that order). On a master (salt-run state.orchestrate kolla.deploy):
    the same across every host (kolla/orchestrate.jinja).
    Pillar `kolla_services` (a list) limits the run to some services; a full run also
    removes the containers of services no longer enabled here (volumes kept).
    The run's first states check that it may start (kolla_salt.declaration.preflight; with pillar
    `kolla_allow_release_jump`, a jump OpenStack does not support is said, not
    refused) and stop it before anything changes when not: `kolla-salt deploy` reads
    their verdict by their ids. Operator files that do not validate are the first's
    verdict (pillar kolla_problems). With pillar `kolla_backup_before_migrations`
    (an upgrade on one host) the database is backed up next, before any service
    changes release (kolla_backup.before_migrations); with pillar `kolla_restore`
    ({backup, first}: mariadb-restore or rollback --release on one host) the database
    is backed up and backup `backup` put back before the services start again
    (kolla_backup.restored). Through a master the runner kolla_galera does both, as
    steps of kolla.upgrade and kolla.restore / kolla.rollback_release. -#}
{%- if opts.get("__role") == "master" %}
{%- from "kolla/orchestrate.jinja" import orchestrate %}
{{ orchestrate("kolla-deploy") }}
{%- elif "kolla" not in pillar %}
kolla-deploy-checks:
  kolla_container.deployable: []
{%- else %}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set declared = pillar.kolla.services | map(attribute="name") | list %}
{%- set selected = declared | select("in", only or declared) | list %}
{%- set includes = selected | map("regex_replace", "^", "kolla.") | list + ["kolla.final"]
                   + ([] if only else ["kolla.undeclared"]) %}
include: {{ includes | json }}

kolla-deploy-checks:
  kolla_container.deployable:
    - services: {{ only | json }}
    - allow_release_jump: {{ pillar.get("kolla_allow_release_jump", false) | json }}
    - order: 1
    - failhard: true
{%- if pillar.get("kolla_backup_before_migrations") %}

kolla-deploy-backup-before-migrations:
  kolla_backup.before_migrations:
    - services: {{ only | json }}
    - command: {{ pillar.kolla_backup_before_migrations | json }}
    - order: 3
    - failhard: true
{%- endif %}
{%- if pillar.get("kolla_restore") %}

kolla-deploy-restore:
  kolla_backup.restored:
    - backup: {{ pillar.kolla_restore.backup | json }}
    - first: {{ (pillar.kolla_restore.first or []) | json }}
    - command: {{ pillar.get("kolla_command", "salt-call state.apply kolla.deploy") | json }}
    - order: 3
    - failhard: true
{%- endif %}
{%- if not only %}

kolla-deploy-nothing-kept-in-use:
  kolla_container.nothing_kept_in_use:
    - declared_sets: {{ pillar.kolla.services | map(attribute="set") | list | json }}
    - order: 2
    - failhard: true
{%- endif %}
{%- endif %}
