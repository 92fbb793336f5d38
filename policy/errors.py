"""The policy package's error hierarchy: every rule violation the pure domain reports."""


class PolicyError(ValueError):
    """A decision or input the pure domain rejects; the message names the thing and the numbers."""
