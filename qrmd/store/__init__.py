"""The state store subsystem: the journal's settings, the StateStore actor and its checkpoint
ticker, and the daemon's start record."""
