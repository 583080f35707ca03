"""The containers on a host: their declared spec, what the Docker engine says of them,
the manager that plans and creates them, its crash-safe swaps (and haproxy's part in
them), their generations and config folders, and one-shot jobs. It takes specs and
knows nothing of the operator's files (declaration/)."""
