{#- Orchestrated upgrade: salt-run state.orchestrate kolla.upgrade
        [pillar='{"kolla_services": ["keystone"], "kolla_batch": 1}']

    The deploy orchestration (kolla/orchestrate.jinja) applied `kolla_batch` hosts at a
    time (default 1): each service is upgraded host by host and a failure stops
    everything after it, naming the host. Within a service, kolla_container states
    replace one container at a time: jobs (schema migrations) first, then an atomic
    swap gated on the health check. Hosts already at the target report no changes,
    so a failed run is resumed by running it again.
    Once the walk may start, before any service changes release, the database is
    backed up when a container is about to change release (migrations no container
    rollback takes back; `rollback --release` restores it): pillar
    `kolla_backup_before_migrations` is what asked, said in the backup's reason
    (false: no backup). -#}
{%- from "kolla/orchestrate.jinja" import orchestrate %}
{{ orchestrate("kolla-upgrade", batch=pillar.get("kolla_batch", 1),
               backup=pillar.get("kolla_backup_before_migrations", "salt-run state.orchestrate kolla.upgrade")) }}
