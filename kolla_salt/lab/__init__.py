"""The lab: several hosts on one machine, each in network namespaces of its own
(namespaces), with a salt-master and minions."""
