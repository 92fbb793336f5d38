"""Stand-ins for qrmd's peers and the deterministic simulation; production never imports it."""
