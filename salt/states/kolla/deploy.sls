{#- On a minion (salt-call, or salt HOST state.apply kolla.deploy): deploys every
    service enabled for this host, in container-set tree order (pillar kolla:services
    is already in that order). On a master (salt-run state.orchestrate kolla.deploy):
    the same across every host (kolla/orchestrate.jinja).
    Pillar `kolla_services` (a list) limits the run to some services; a full run also
    removes the containers of services no longer enabled here (volumes kept). -#}
{%- if opts.get("__role") == "master" %}
{%- from "kolla/orchestrate.jinja" import orchestrate %}
{{ orchestrate("kolla-deploy") }}
{%- else %}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set declared = pillar.kolla.services | map(attribute="name") | list %}
{%- set selected = declared | select("in", only or declared) | list %}
{%- set includes = selected | map("regex_replace", "^", "kolla.") | list + ["kolla.final"]
                   + ([] if only else ["kolla.undeclared"]) %}
include: {{ includes | json }}
{%- endif %}
