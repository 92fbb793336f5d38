"""The NUMA memory balancer subsystem: its settings, the MemoryBalancer actor, its eviction
plugin, its host checks and metrics."""
