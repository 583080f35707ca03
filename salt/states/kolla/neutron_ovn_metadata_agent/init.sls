{% from "kolla/service.jinja" import deploy_service %}
{{ deploy_service("neutron_ovn_metadata_agent") }}
