"""tests of qrmd.status."""
