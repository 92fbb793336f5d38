"""qrmd/host package."""
