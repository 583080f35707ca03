"""The roads to the hosts: salt-call on this host (saltcall) or a salt-master (master;
node makes a master or a minion), the master's walks of the tree (rollout), and a
state run's return read alike on either road (statereturns)."""
