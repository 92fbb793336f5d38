"""journal package."""
