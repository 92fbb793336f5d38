"""The CPU pressure eviction subsystem: its settings, its actor and its two eviction plugins."""
