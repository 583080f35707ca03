{#- Deploys every service enabled for this host, in container-set tree order
    (pillar kolla:services is already in that order). `kolla_services` (a list,
    from the command line) limits the run to some services; a full run also
    removes the containers of services no longer enabled here (volumes kept). -#}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set declared = pillar.kolla.services | map(attribute="name") | list %}
{%- set selected = declared | select("in", only or declared) | list %}
{%- if selected %}
include: {{ selected | map("regex_replace", "^", "kolla.") | list | json }}
{%- endif %}
{%- if not only %}

kolla-deploy-only-declared-containers:
  kolla_container.only_declared:
    - declared_sets: {{ pillar.kolla.services | map(attribute="set") | list | json }}
{%- endif %}
