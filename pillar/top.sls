base:
  '*':
    - kolla
