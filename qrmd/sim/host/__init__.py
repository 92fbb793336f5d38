"""Settable stand-ins for the host's ports, for tests, benchmarks and simulations: NUMA metrics
(``metrics``), containers' anonymous memory per NUMA node (``memory``), containers' CPU load
(``cpu_load``). Each is set from the caller's thread while the daemon's actors read it."""
