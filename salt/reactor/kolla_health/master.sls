{#- Reaction of a salt-master to `salt/beacon/<minion>/kolla_health/<name>/unhealthy`:
    run kolla_health.restart on the minion that reported it (the cap and
    backoff are kept there, per host). Map it in the master config:

      reactor:
        - 'salt/beacon/*/kolla_health/*/unhealthy':
          - <checkout>/salt/reactor/kolla_health/master.sls #}
{%- if data.get('name') and data.get('id') %}
kolla-health-restart-{{ data.name }}:
  local.kolla_health.restart:
    - tgt: {{ data.id | json }}
    - args:
      - name: {{ data.name | json }}
      - incarnation: {{ data.incarnation | json }}
      - verdict: {{ data.verdict | json }}          {#- an unhealthy event always carries both #}
      - healthy_for: {{ data.healthy_for | json }}
{%- endif %}
