"""The policy package's error base: every decision or state error is a PolicyError."""


class PolicyError(ValueError):
    """A request, decision or state that the policy cannot act on."""
