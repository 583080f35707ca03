"""What a host adds to the settings its services are rendered with: its API address
(from its interfaces: the ip4_interfaces grain, or this host's), where its Geneve
tunnels end, and the addresses its services reach the APIs and the database at; and
the checks of the links the operator named (api_interface, tunnel_interface,
neutron_external_interface) against what the host has."""
import json

from ..errors import ValidationError


def interface_address(settings, interfaces):
    """The IPv4 address of api_interface, from {interface: [addresses]} (grains)."""
    name = settings["api_interface"]
    addresses = interfaces.get(name) or []
    if not addresses:
        raise ValidationError([f"globals.yml: key 'api_interface'/'network_interface' is '{name}', "
                               f"which has no IPv4 address on this host (have: {', '.join(sorted(interfaces))})"])
    return addresses[0]


def tunnel_facts(settings, interfaces, datapath):
    """Where Geneve tunnels end, when not on the API address (host_facts'): the
    address of tunnel_interface (ovn-controller's encap IP) and, with the userspace
    datapath, that link as ovs_tunnel_link: ovs-vswitchd makes it the port of
    ovs_tunnel_bridge and moves its address there (the openvswitch folder), where it
    is found after the first deploy."""
    name, bridge = settings["tunnel_interface"], settings["ovs_tunnel_bridge"]
    if name in ("", settings["api_interface"]):
        if name and datapath == "netdev":
            raise ValidationError([f"globals.yml: key 'tunnel_interface' is '{name}', the API interface: with the "
                                   f"userspace datapath (netdev) its address would move onto the bridge {bridge}; "
                                   f"give the tunnels a link of their own, or leave tunnel_interface empty (one "
                                   f"host needs no tunnel)"])
        return {}
    found = interfaces.get(name) or interfaces.get(bridge)
    if not found:
        raise ValidationError([f"globals.yml: key 'tunnel_interface' is '{name}', which has no IPv4 address on this "
                               f"host, nor has {bridge} (have: {', '.join(sorted(interfaces))})"])
    return {"tunnel_interface_address": found[0], "ovs_tunnel_link": name if datapath == "netdev" else ""}


def external_link_problems(settings, interfaces):
    """neutron_external_interface becomes a port of an Open vSwitch bridge, which takes
    every frame it receives: the link of the host's own addresses (the API's, the
    tunnels') or any link with an address is refused."""
    name = settings["neutron_external_interface"]
    if not name:
        return []
    where = f"globals.yml: key 'neutron_external_interface' is '{name}'"
    if name in (settings["api_interface"], settings["tunnel_interface"]):
        return [f"{where}, the link of this host's API or tunnel address: the provider networks need a link of "
                f"their own (one without an address)"]
    if interfaces.get(name):
        return [f"{where}, which has the address {', '.join(interfaces[name])} on this host: Open vSwitch would "
                f"take its traffic; give the provider networks a link without an address"]
    return []


def host_facts(settings, address):
    """What a host adds to the settings its services are rendered with: its API address,
    and kolla_internal_fqdn (kolla-ansible's name), the address of the API endpoints:
    haproxy's VIP when enable_haproxy, else the host's own."""
    if settings["enable_haproxy"] and settings["kolla_internal_vip_address"] == address:
        raise ValidationError([f"globals.yml: key 'kolla_internal_vip_address' is {address}, this host's API "
                               f"address: haproxy would listen where the API services do; choose another "
                               f"address (on one host a loopback one, such as 127.0.0.10)"])
    internal = settings["kolla_internal_vip_address"] if settings["enable_haproxy"] else address
    external = settings["kolla_enable_tls_external"]
    internal_protocol = "https" if settings["kolla_enable_tls_internal"] else "http"
    return {"api_interface_address": address,
            # Geneve ends on the API address, through no bridge of its own (tunnel_facts
            # says otherwise for a tunnel_interface).
            "tunnel_interface_address": address, "ovs_tunnel_link": "",
            "kolla_internal_fqdn": internal,
            # How services reach each other and keystone (openstack.jinja's internal_url).
            "internal_protocol": internal_protocol,
            # Where the catalog's public endpoints point (a service folder's register:).
            "public_protocol": "https" if external else internal_protocol,
            "public_fqdn": settings["kolla_external_fqdn"] if external else internal,
            # One database server: on the service's own host (build_services says otherwise
            # for a Galera cluster behind haproxy).
            "database_cluster": False, "database_address": address}


def local_interfaces():
    """{interface: [IPv4 addresses]} of this host, like the ip4_interfaces grain."""
    import subprocess
    out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True).stdout
    return {link["ifname"]: [a["local"] for a in link.get("addr_info", [])] for link in json.loads(out)}
