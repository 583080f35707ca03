{#- Orchestrated upgrade: salt-run state.orchestrate kolla.upgrade
        [pillar='{"kolla_services": ["keystone"], "kolla_target": "ctl*", "kolla_batch": 1}']

    Walks the container-set tree (kolla/tree.yaml) in order; each service is
    applied host by host (batch) and a failure stops everything after it
    (failhard + require). Within a service, kolla_container states replace one
    container at a time: jobs (schema migrations) first, then an atomic swap
    gated on the health check. Hosts already at the target report no changes,
    so a failed run is resumed by running it again. -#}
{%- import_yaml "kolla/tree.yaml" as tree %}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set previous = namespace(id=none) %}
{%- for top in tree %}
{%- for service in top.services or [] if not only or service in only %}
kolla-upgrade-{{ top.name }}-{{ service }}:
  salt.state:
    - tgt: {{ pillar.get("kolla_target", "*") | json }}
    - sls: [kolla.{{ service }}]
    - batch: {{ pillar.get("kolla_batch", 1) }}
    - failhard: true
{%- if previous.id %}
    - require:
      - salt: {{ previous.id }}
{%- endif %}
{%- set previous.id = "kolla-upgrade-" ~ top.name ~ "-" ~ service %}
{%- endfor %}
{%- endfor %}
