"""Operating a deployed cloud: database backups and restores, the Galera cluster, key
repositories, TLS certificates, the admin's client files, compute drain and the first
server's prerequisites (init-runonce)."""
