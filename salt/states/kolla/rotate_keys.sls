{#- Orchestrated key rotation across hosts (kolla-salt rotate-keys through a master
    does this):
        salt-run state.orchestrate kolla.rotate_keys [pillar='{"kolla_services": ["keystone"]}']
    The operator folder's repositories that rotate (keystone's fernet keys: the staged
    key made primary, a new one staged) of the services the pillar names (else every
    placed one whose keys rotate: kolla_keys.rotating), once every host that runs them
    holds the current keys ("distribute before use"; refused otherwise, naming the
    hosts, nothing changed); then kolla.deploy's walk of those services writes the new
    keys on every host. -#}
{%- from "kolla/orchestrate.jinja" import deploy_after %}
{%- set only = pillar.get("kolla_services") or salt["saltutil.runner"]("kolla_keys.rotating") %}
{%- if not only %}
kolla-rotate-keys-nothing:
  salt.runner:
    - name: kolla_rollout.note
    - text: "no host runs a service with keys that rotate; nothing to do"
{%- else %}
kolla-rotate-keys-rotate:
  salt.runner:
    - name: kolla_keys.rotate
    - services: {{ only | json }}
    - failhard: true

{{ deploy_after("kolla-rotate-keys", {"kolla_services": only}) }}
{%- endif %}
