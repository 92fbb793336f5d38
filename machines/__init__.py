"""machines package."""
