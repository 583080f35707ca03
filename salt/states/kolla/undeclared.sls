{#- Removes this host's containers of services disabled or not meant for it
    (enable_<service>, roles); their named volumes are kept. -#}
kolla-deploy-only-declared-containers:
  kolla_container.only_declared:
    - declared_sets: {{ pillar.kolla.services | map(attribute="set") | list | json }}
