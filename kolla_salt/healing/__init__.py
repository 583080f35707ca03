"""The health loop: tells a hung service from a slow one and restarts what hangs
(health), with the host's own signals (hostsignals); healthloop runs it on a host
(its beacon's config, its ledger, the all-in-one daemon); status shows what runs
with what the loop judged of it."""
