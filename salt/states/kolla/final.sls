{#- The jobs that run once every service of the run is done on this host (a master's
    walk runs this SLS after every host's steps: kolla_salt.roads.rollout.walk): a folder's
    job with `after_every_service: true`, such as nova's online data migrations,
    which wait until the compute hosts run the new code too. A service is waited for
    by a pattern (kolla.[n]ova_compute): Salt lets a pattern match no state of the
    run (a service not selected or not on this host). -#}
{%- set only = pillar.get("kolla_services") or [] %}
{%- set jobs = namespace(any=false) %}
{%- for service in pillar.kolla.services if not only or service.name in only %}
{%- for job in service.final_jobs %}
{%- set jobs.any = true %}
kolla-{{ service.name }}-final-job-{{ job.name }}:
  kolla_container.job:
    - name: {{ job.name }}
    - spec: {{ job | json }}
    - require:
{%- for waited in pillar.kolla.services %}
      - sls: kolla.[{{ waited.name[0] }}]{{ waited.name[1:] }}
{%- endfor %}
{%- endfor %}
{%- endfor %}
{%- if not jobs.any %}
kolla-final-no-job-here:
  test.nop: []
{%- endif %}
