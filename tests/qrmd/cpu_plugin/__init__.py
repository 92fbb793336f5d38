"""tests of qrmd.cpu_plugin."""
