{#- Orchestrated upgrade: salt-run state.orchestrate kolla.upgrade
        [pillar='{"kolla_services": ["keystone"], "kolla_batch": 1}']

    The deploy orchestration (kolla/orchestrate.jinja) applied `kolla_batch` hosts at a
    time (default 1): each service is upgraded host by host and a failure stops
    everything after it, naming the host. Within a service, kolla_container states
    replace one container at a time: jobs (schema migrations) first, then an atomic
    swap gated on the health check. Hosts already at the target report no changes,
    so a failed run is resumed by running it again. -#}
{%- from "kolla/orchestrate.jinja" import orchestrate %}
{{ orchestrate("kolla-upgrade", batch=pillar.get("kolla_batch", 1)) }}
