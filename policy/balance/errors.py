"""The memory balancer's errors: bad round inputs, configuration or records (memory-balancer)."""

from policy.errors import ErrorKind, PolicyError

__all__ = ["BalanceError", "RoundFailed", "within"]


class BalanceError(PolicyError):
    """Bad balancer input (a field named with its path), configuration or record.

    A round that fails the way the reference's rounds fail (a missing metric, a missing distance
    list) is not an exception: it is a round outcome with status ``prepareFailed`` (§7.12).
    """

    kind = ErrorKind.INVALID


class RoundFailed(PolicyError):  # noqa: N818 - a round outcome, not an input error
    """A step ended the round with an error (§7.12): missing metric, missing distance list,
    failed pod lookup. ``plan_round`` turns it into a ``prepareFailed`` outcome and never lets
    it escape; the message becomes the record's ``failedReason``.

    Not a ``BalanceError``: the inputs were well formed, and the code that re-raises a
    ``BalanceError`` with its field path must not catch a failed round. Its kind is a refusal:
    this round's inputs do not let it go on, and the next round decides afresh.
    """

    kind = ErrorKind.REFUSED


def within(where: str, exc: BalanceError) -> BalanceError:
    """``exc`` with ``where`` in front of its message, unless its message already starts there."""
    message = str(exc)
    return BalanceError(message if message.startswith(where) else f"{where}: {message}")
