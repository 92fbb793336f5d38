"""qrmd package."""
