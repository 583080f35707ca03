{#- A compute host emptied of its servers, or taking them again, across hosts
    (kolla-salt compute through a master does this):
        salt-run state.orchestrate kolla.compute pillar='{"kolla_compute": {"action": "drain", "host": "host2"}}'
    `action`: drain (nova-compute disabled there, its servers live-migrated to the other
    compute hosts; refused, naming them, when they do not fit there) or undrain (nova
    schedules there again); `host`: the compute host as nova names it; `timeout`
    (drain): seconds the servers have to move, 600 when not given. -#}
{%- set order = pillar.get("kolla_compute") or {} %}
{%- if order.get("action") not in ("drain", "undrain") or not order.get("host") %}
kolla-compute-refused:
  salt.runner:
    - name: kolla_rollout.refuse
    - text: {{ ("pillar kolla_compute: expected {action: drain or undrain, host: a compute host[, timeout: "
                "seconds]}, got " ~ (order | json)) | json }}
{%- else %}
kolla-compute-{{ order.action }}:
  salt.runner:
    - name: kolla_compute.{{ order.action }}
    - host: {{ order.host | json }}
    {%- if order.action == "drain" %}
    - timeout: {{ order.get("timeout", 600) | float }}
    {%- endif %}
{%- endif %}
