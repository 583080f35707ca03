{#- Deploys every service enabled for this host, in container-set tree order
    (pillar kolla:services is already in that order). `kolla_services` (a list,
    from the command line) limits the run to some services. -#}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set selected = pillar.kolla.services | map(attribute="name") | select("in", only or pillar.kolla.services | map(attribute="name") | list) | list %}
include: {{ selected | map("regex_replace", "^", "kolla.") | list | json }}
