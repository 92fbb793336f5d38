"""The sys-advisor link subsystem: its settings, the AdvisorLink actor, the GetCheckpoint
server, its health check and metrics."""
