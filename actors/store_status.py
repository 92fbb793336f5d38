"""What the StateStore publishes about itself: one frozen ``StoreStatus`` (DESIGN.md, Actors).

Each actor owns its data and shares only immutable values. The store's health and figures —
commits and refusals, checkpoints, the journal's bytes, records and fsync latency, what
recovery did — are therefore never read off the store from another thread: the store builds
a new ``StoreStatus`` whenever one of them changes, tells its status subscribers (the metrics
endpoint and ``/healthz`` keep the latest), and answers ``GetStatus`` with the current one.

A status is a value, not a view: the journal's live counters are copied into it
(``JournalFigures.of``), so a status handed out yesterday still says what it said then. The
store moves from one status to the next with the ``with_*`` methods below, each returning a
new value; counters (``*_total``) only grow.

Health carries its reason: ``StoreHealth.reason`` is the phrase ``/healthz`` answers with
(``state store refuses commits: …``), None while the store is healthy. A journal that could
not undo a failed write makes the store unhealthy until the next start (that commit's outcome
is unknown, counted apart from the refusals); a commit the journal refused makes it unhealthy
until the next successful write (``actors.store_refusals``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from actors.store_report import RecoveryReport
from journal import FsyncStats, JournalStats

__all__ = ["FsyncSummary", "JournalFigures", "StoreHealth", "StoreStatus"]


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """Whether the store is healthy and, when it is not, why.

    Attributes:
        reason: the whole phrase ``/healthz`` shows (``state store refuses commits: …``), or
            None while healthy. An unhealthy store always says why.
    """

    reason: str | None = None

    @property
    def healthy(self) -> bool:
        """No reason to be unhealthy."""
        return self.reason is None


@dataclass(frozen=True, slots=True)
class FsyncSummary:
    """Latency of the journal's fsyncs so far (files and directories together).

    Attributes:
        count: fsyncs made.
        total_s: seconds spent in them.
        max_s: the longest one.
        slow: how many took longer than the journal's slow-fsync threshold.
    """

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    slow: int = 0

    @classmethod
    def of(cls, stats: FsyncStats) -> FsyncSummary:
        """A copy of the syncer's live counters."""
        return cls(count=stats.count, total_s=stats.total_s, max_s=stats.max_s, slow=stats.slow)

    @property
    def mean_s(self) -> float:
        """Average seconds per fsync (0 before the first)."""
        return self.total_s / self.count if self.count else 0.0


@dataclass(frozen=True, slots=True)
class JournalFigures:
    """What the journal did since the store opened it, copied out of its live counters.

    Attributes:
        records_appended: records acknowledged.
        bytes_appended: frame bytes of those records.
        append_failures: appends the journal could not persist (cut back, or beyond repair).
        rotations: segments started after the first.
        checkpoints: checkpoints written.
        files_deleted: segments and checkpoints removed by retention.
        fsync: fsync latency.
    """

    records_appended: int = 0
    bytes_appended: int = 0
    append_failures: int = 0
    rotations: int = 0
    checkpoints: int = 0
    files_deleted: int = 0
    fsync: FsyncSummary = FsyncSummary()

    @classmethod
    def of(cls, stats: JournalStats) -> JournalFigures:
        """A copy of the journal's live counters: later appends do not change it."""
        return cls(
            records_appended=stats.appends,
            bytes_appended=stats.bytes_appended,
            append_failures=stats.append_failures,
            rotations=stats.rotations,
            checkpoints=stats.checkpoints,
            files_deleted=stats.files_deleted,
            fsync=FsyncSummary.of(stats.fsync),
        )


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """The state store's health and figures at one moment (module rules).

    Attributes:
        recovery: what the store found and did when it opened its journal.
        health: healthy, or why not.
        last_seq: seq of the published snapshot.
        commits_total: commits acknowledged.
        events_committed_total: events in those commits.
        commits_refused_total: commits refused before anything was written (events that do
            not fit the state, or a cause or event that cannot be encoded).
        commit_failures_total: commits refused because the journal could not persist them.
        commits_unavailable_total: commits refused because the store refuses every commit.
        commits_outcome_unknown_total: records whose write failed and could not be cut back:
            never acknowledged, yet perhaps on disk and replayed at the next start (not
            refusals: their callers were told the outcome is unknown).
        commit_seconds_total: time spent in acknowledged commits (journal write and fsync,
            apply, publish), on the store's clock.
        checkpoints_total: checkpoints written.
        checkpoint_failures_total: checkpoints that failed (logged; commits go on).
        checkpoint_seq: seq of the newest checkpoint (0: none).
        journal: the journal's own figures.
    """

    recovery: RecoveryReport
    health: StoreHealth = StoreHealth()
    last_seq: int = 0
    commits_total: int = 0
    events_committed_total: int = 0
    commits_refused_total: int = 0
    commit_failures_total: int = 0
    commits_unavailable_total: int = 0
    commits_outcome_unknown_total: int = 0
    commit_seconds_total: float = 0.0
    checkpoints_total: int = 0
    checkpoint_failures_total: int = 0
    checkpoint_seq: int = 0
    journal: JournalFigures = JournalFigures()

    @classmethod
    def recovered(cls, recovery: RecoveryReport, checkpoint_seq: int) -> StoreStatus:
        """The status of a store that has just opened its journal.

        Args:
            recovery: what opening did.
            checkpoint_seq: the newest checkpoint's seq (0: none).
        """
        return cls(recovery=recovery, last_seq=recovery.last_seq, checkpoint_seq=checkpoint_seq)

    @property
    def refusals_total(self) -> int:
        """Commits refused for any reason (nothing was written for any of them)."""
        refused = self.commits_refused_total + self.commit_failures_total
        return refused + self.commits_unavailable_total

    def with_commit(
        self, seq: int, events: int, seconds: float, journal: JournalFigures | None = None
    ) -> StoreStatus:
        """After an acknowledged commit of ``events`` events as record ``seq``, with the
        journal's figures after it when given (one new value where ``with_journal`` would
        make a second)."""
        # Built field by field: this runs for every commit (the journal's figures handed in,
        # not added by ``with_journal``), and ``dataclasses.replace`` walks the fields'
        # metadata each time (3.9 µs vs 1.3 µs).
        return StoreStatus(
            recovery=self.recovery,
            health=self.health,
            last_seq=seq,
            commits_total=self.commits_total + 1,
            events_committed_total=self.events_committed_total + events,
            commits_refused_total=self.commits_refused_total,
            commit_failures_total=self.commit_failures_total,
            commits_unavailable_total=self.commits_unavailable_total,
            commits_outcome_unknown_total=self.commits_outcome_unknown_total,
            commit_seconds_total=self.commit_seconds_total + seconds,
            checkpoints_total=self.checkpoints_total,
            checkpoint_failures_total=self.checkpoint_failures_total,
            checkpoint_seq=self.checkpoint_seq,
            journal=self.journal if journal is None else journal,
        )

    def with_refusal(self) -> StoreStatus:
        """After a commit refused before anything was written."""
        return replace(self, commits_refused_total=self.commits_refused_total + 1)

    def with_commit_failure(self) -> StoreStatus:
        """After a commit the journal could not persist."""
        return replace(self, commit_failures_total=self.commit_failures_total + 1)

    def with_unavailable(self) -> StoreStatus:
        """After a commit refused because the store refuses every commit."""
        return replace(self, commits_unavailable_total=self.commits_unavailable_total + 1)

    def with_outcome_unknown(self, records: int) -> StoreStatus:
        """After ``records`` records failed and could not be cut back (their outcome unknown)."""
        return replace(
            self, commits_outcome_unknown_total=self.commits_outcome_unknown_total + records
        )

    def with_checkpoint(self, seq: int) -> StoreStatus:
        """After a checkpoint covering records up to ``seq`` was written."""
        return replace(self, checkpoints_total=self.checkpoints_total + 1, checkpoint_seq=seq)

    def with_checkpoint_failure(self) -> StoreStatus:
        """After a checkpoint that failed."""
        return replace(self, checkpoint_failures_total=self.checkpoint_failures_total + 1)

    def with_health(self, health: StoreHealth) -> StoreStatus:
        """With ``health`` instead of the current health."""
        return replace(self, health=health)

    def with_journal(self, figures: JournalFigures) -> StoreStatus:
        """With the journal's figures as they are now."""
        return replace(self, journal=figures)
