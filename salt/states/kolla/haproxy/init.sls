{% from "kolla/service.jinja" import deploy_service %}
{%- if pillar.kolla.settings.enable_keepalived and pillar.kolla.services | selectattr("name", "equalto", "haproxy") | list %}
# The hosts keepalived does not give the VIP to must bind it too, so that haproxy
# serves the moment the VIP arrives (kolla-ansible sets the same).
kolla-haproxy-nonlocal-bind:
  sysctl.present:
    - name: net.ipv4.ip_nonlocal_bind
    - value: 1
{%- endif %}
{{ deploy_service("haproxy") }}
