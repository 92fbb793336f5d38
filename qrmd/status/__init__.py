"""The daemon's shared status: the health registry, the metrics registry and the HTTP endpoint
serving both; every subsystem adds its sources to them."""
