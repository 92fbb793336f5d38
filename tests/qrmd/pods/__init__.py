"""tests of qrmd.pods."""
