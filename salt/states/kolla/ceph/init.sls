{% from "kolla/service.jinja" import deploy_service %}
{{ deploy_service("ceph") }}
