{#- Reaction of a masterless minion (its own reactor engine) to its beacons.
    Without a master, beacon events stay on the minion's bus as one
    `__beacons_return` event that lists them all; this picks the
    kolla_health `unhealthy` ones and calls kolla_health.restart in-process
    (`caller`), which applies the cap and backoff. The policy comes from the
    minion's options: reactor files get no pillar. #}
{%- for event in data.get('beacons', []) %}
{%- set parts = event.get('tag', '').split('/') %}
{%- if parts[3:4] == ['kolla_health'] and parts[-1] == 'unhealthy' and event.data.get('name') %}
kolla-health-restart-{{ event.data.name }}:
  caller.kolla_health.restart:
    - args:
      - name: {{ event.data.name | json }}
      - incarnation: {{ event.data.incarnation | json }}
      - verdict: {{ event.data.verdict | json }}          {#- an unhealthy event always carries both #}
      - healthy_for: {{ event.data.healthy_for | json }}
{%- endif %}
{%- endfor %}
