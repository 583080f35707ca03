{% from "kolla/service.jinja" import deploy_service %}
{%- if pillar.kolla.settings.enable_keepalived and pillar.kolla.services | selectattr("name", "equalto", "haproxy") | list %}
# The hosts keepalived does not give the VIP to must bind it too, so that haproxy
# serves the moment the VIP arrives (kolla-ansible sets the same).
kolla-haproxy-nonlocal-bind:
  sysctl.present:
    - name: net.ipv4.ip_nonlocal_bind
    - value: 1
{%- endif %}
# haproxy's swap starts the new generation on the same ports (SO_REUSEPORT), then
# stops the old one: the connections waiting in the old one's accept queue then
# move to the new listener instead of being reset (a CI run's certificate renewal
# had one token request refused). Only swaps need it, and only a deploy swaps, so
# the running value is enough (Linux 5.14 and later; older kernels skip this).
kolla-haproxy-migrate-pending-connections:
  kolla_host.running_value:
    - name: net.ipv4.tcp_migrate_req
    - value: 1
{{ deploy_service("haproxy") }}
