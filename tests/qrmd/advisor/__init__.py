"""tests of qrmd.advisor."""
