"""wire package."""
