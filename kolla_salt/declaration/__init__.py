"""What the operator declares and the pillar made of it: settings and passwords, the
container-set tree, roles (where each service runs), pins, releases, a host's facts,
the service folders rendered (with overrides merged and registrations), the pillar
(inventory) and the checks a deploy makes of it on a host before it changes anything
(preflight)."""
