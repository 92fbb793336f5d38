"""tests of qrmd.cpu_pressure."""
