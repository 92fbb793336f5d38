"""The state store subsystem: the journal's settings, the StateStore actor and its checkpoint
ticker, the daemon's start record, and taking over katalyst-agent's checkpoint."""
