"""The CPU plugin subsystem: the machine and its reserve, the Allocator, the kubelet plugin
servers with their registration and connection cap, and the topology source."""
