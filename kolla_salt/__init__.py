"""kolla-salt: containerized OpenStack driven by Salt.

The package is the library every entry point shares: the CLI, the Salt
execution/state modules (thin adapters in salt/), the pillar builder and the
tests. Nothing here imports Salt.
"""
