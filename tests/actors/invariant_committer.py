"""A committer that checks the CPU invariants (``policy.cpu.invariants``) after every commit.

It applies commits in memory like ``ApplyingCommitter`` and fails the test at the first commit
whose resulting state breaks a rule, naming the record's cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.store_messages import Snapshot
from policy.cpu.context import PolicyContext
from policy.cpu.invariants import check_invariants
from policy.state.events import Event
from policy.state.sections import State, apply_all


class InvariantCheckingCommitter:
    """A ``Committer`` that applies events and asserts the invariants of every new state.

    Args:
        state: the durable state to start from.
        settings: the reserve the states must respect; ``restart_with`` changes it, as a
            restart with other flags does.
    """

    def __init__(self, state: State, settings: PolicyContext) -> None:
        self.snapshot = Snapshot(state, 0)
        self.settings = settings
        self.causes: list[Mapping[str, Any]] = []

    def restart_with(self, settings: PolicyContext) -> None:
        """The next commits are made under ``settings`` (the daemon restarted)."""
        self.settings = settings

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        state = apply_all(self.snapshot.state, events)
        violations = check_invariants(state.cpu, self.settings)
        assert not violations, f"commit {len(self.causes) + 1} ({cause.get('rpc')}): {violations}"
        self.snapshot = Snapshot(state, self.snapshot.seq + 1)
        self.causes.append(cause)
        return self.snapshot

    def latest(self) -> Snapshot:
        return self.snapshot
