"""tests of qrmd.store."""
