"""Group commit at the socket: kubelet calls that arrive together reach the Allocator as one
``CommandGroup``, so one fsync covers all their records (DESIGN.md, the commit protocol).

The gRPC handler threads of one server share a ``CallGrouper``. A call that finds no group
in flight leads: it asks the Allocator with the calls waiting at that moment (itself first),
hands each caller its outcome, then hands the lead to the oldest call that arrived meanwhile.
The others wait for their outcome. Alone, a call is asked as itself, exactly as without
grouping; under load, the calls that queued behind a group's fsync share the next one.

What a caller is answered is its own outcome, given only after the group's fsync (the
Allocator returns the outcomes after it), so no answer depends on a record not on disk; a
failed fsync fails every call of its group with ``AllocatorUnavailable`` and kubelet retries.
That answer promises nothing about the records: if the journal could not cut the group back,
they may be replayed at the next start (the store refuses every commit until then), and the
retried calls are answered from what it recovers (every kubelet call is idempotent).
A call whose deadline passes before its group was sent is withdrawn and never decided; one
whose group was sent answers UNAVAILABLE as any timed-out ask does (the group may still land,
and every kubelet call is idempotent).

A grouper also says since when its calls have gone without an answer from the Allocator
(``unanswered_since``, read by ``wire.call_watch``): a few attribute writes under the lock it
takes anyway, one clock read per call that finds no stretch running and at most one per
group. A group that got no answer in time leaves the stretch running; if no call waits then,
the grouper asks the Allocator a read (``GetResourcePluginOptions``) without waiting, whose
answer, queued behind the unanswered group, says that the Allocator got past it: the stretch
ends there, or at the next group answered, whichever comes first.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

from actors.allocator_messages import CommandGroup, GroupOutcome
from policy.cpu.commands import (
    Allocate,
    GetResourcePluginOptions,
    GetTopologyHints,
    PluginCall,
    RemovePod,
)
from wire.call_watch import KubeletCallWatch
from wire.rpc import ActorRef

__all__ = ["MAX_GROUP", "CallGrouper"]

#: The most calls in one group: kubelet's own concurrency is far below it; a bound keeps one
#: group's turn (and its callers' wait) short.
MAX_GROUP = 16

Grouped = Allocate | RemovePod | GetTopologyHints


class _Waiting:
    """One caller's call, its outcome once served, and whether it was handed the lead.

    A caller that does not lead waits on ``woken``, a lock held until it is woken (its
    outcome set, or the lead handed to it), which happens once: one lock, acquired in C with
    the GIL released, where an ``Event`` would build a ``Condition`` and a waiter lock.
    """

    __slots__ = ("call", "lead", "outcome", "woken")

    def __init__(self, call: Grouped) -> None:
        self.call = call
        self.outcome: GroupOutcome | None = None
        self.lead = False
        self.woken = _thread.allocate_lock()
        self.woken.acquire()

    def wait(self, timeout: float | None) -> bool:
        """Wait to be woken, at most ``timeout`` seconds (None: for ever); whether it was."""
        return self.woken.acquire(True, -1 if timeout is None else max(timeout, 0.0))

    def wake(self) -> None:
        """Wake the caller: its outcome, or the lead, is set. Each happens once per caller
        (a caller handed the lead took its wake-up in ``wait``, or just after a ``wait`` that
        gave up: ``CallGrouper.ask``), so the lock is never released twice; the leader's own
        wake-up is simply never waited for."""
        self.woken.release()


class CallGrouper:
    """Asks the Allocator for the calls of many handler threads, a group at a time.

    Args:
        allocator: the Allocator actor's ref.
        max_group: the most calls in one group.
        watch: the watch of the kubelet call path this grouper joins (its clock is the
            grouper's); None: none watches it (the monotonic clock then).
    """

    def __init__(
        self,
        allocator: ActorRef,
        max_group: int = MAX_GROUP,
        *,
        watch: KubeletCallWatch | None = None,
    ) -> None:
        if max_group < 1:
            raise ValueError(f"a group holds at least one call, got {max_group}")
        self._allocator = allocator
        self._max = max_group
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._leading = False
        self._watch = watch
        self._clock: Callable[[], float] = time.monotonic if watch is None else watch.monotonic
        # When the current stretch of calls without an answer from the Allocator began, or
        # None: every call so far was answered, or none waits (``wire.call_watch``).
        self._unanswered_since: float | None = None
        # The future of the read sent behind a group that got no answer (module docstring).
        self._catch_up: Any = None
        if watch is not None:
            watch.add(self)

    def queued(self) -> int:
        """Calls waiting to be sent to the Allocator now."""
        return len(self._waiting)

    def unanswered_since(self) -> float | None:
        """When the current stretch of calls without an answer began (the clock's time), or
        None: none is running (every call was answered, or none waits)."""
        with self._lock:
            since, catch_up, idle = self._unanswered_since, self._catch_up, not self._leading
        if since is None or catch_up is None or not idle or not _has_answered(catch_up):
            return since
        with self._lock:  # the Allocator got past the unanswered group, and nothing waits
            if self._catch_up is catch_up and not self._leading:
                self._unanswered_since = self._catch_up = None
            return self._unanswered_since

    def ask(self, call: PluginCall[Any], timeout: float | None) -> Any:
        """Serve ``call`` in a group and return its reply (what an ask would).

        Raises:
            What serving it raised (``AllocatorUnavailable``, a ``PolicyError``), or pykka's
            ``Timeout`` (or ``ActorDeadError``) when the Allocator did not answer in time.
        """
        assert isinstance(call, Allocate | RemovePod | GetTopologyHints)
        me = _Waiting(call)
        with self._lock:
            self._waiting.append(me)
            if self._unanswered_since is None:
                self._unanswered_since = self._clock()
            lead = not self._leading
            self._leading = True
        if not lead and not me.wait(timeout):
            with self._lock:
                gave_up = me.outcome is None and not me.lead
                if gave_up:
                    if me in self._waiting:
                        self._waiting.remove(me)  # never sent: withdrawn, never decided
                    # Else its group is in flight: answered as a timed-out ask is.
                elif me.lead:
                    # Handed the lead (under this lock) just as its wait gave up: take the
                    # wake-up it missed, so that its own group's wake-up of it releases a
                    # held lock. Left released, that second release raised in ``_lead``
                    # before the lead was handed on, and every later call waited for a
                    # leader that never came (a SIGSTOP expires every deadline at once).
                    me.woken.acquire()
            if gave_up:
                if self._watch is not None:
                    self._watch.check()  # logs the path stuck without waiting for a probe
                raise pykka.Timeout(f"{type(call).__name__}: no answer within {timeout} s")
        if me.outcome is None:  # handed the lead (or led from the start)
            self._lead(timeout)
        assert me.outcome is not None
        if me.outcome.error is not None:
            raise me.outcome.error
        return me.outcome.reply

    def _lead(self, timeout: float | None) -> None:
        """Send the waiting calls (the leader's among them) as one group, answer each caller,
        then hand the lead to the oldest call still waiting."""
        with self._lock:
            group, self._waiting = self._waiting[: self._max], self._waiting[self._max :]
        answered = True
        try:
            if len(group) == 1:
                reply = self._allocator.ask(group[0].call, timeout=timeout)
                outcomes: tuple[GroupOutcome, ...] = (GroupOutcome(reply=reply),)
            else:
                commands = tuple(waiting.call for waiting in group)
                answer = self._allocator.ask(CommandGroup(commands), timeout=timeout)
                outcomes = tuple(answer)
        except Exception as err:  # the whole group's error: each caller gets it
            outcomes = tuple(GroupOutcome(error=err) for _ in group)
            # An error the Allocator raised (or its supervisor's "unavailable") is an answer;
            # only a timeout leaves the stretch without one running (wire.call_watch).
            answered = not isinstance(err, pykka.Timeout)
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.outcome = outcome
            waiting.wake()
        catch_up = None if answered or self._catch_up is not None else self._ask_catch_up()
        with self._lock:
            if answered:
                self._catch_up = None
            elif catch_up is not None and self._catch_up is None:
                self._catch_up = catch_up
            if self._waiting:
                successor = self._waiting[0]
                successor.lead = True
                successor.wake()
                if answered:  # the calls still waiting start a stretch of their own
                    self._unanswered_since = self._clock()
            else:
                self._leading = False
                if self._catch_up is None:  # idle, and nothing left unanswered
                    self._unanswered_since = None
        if self._watch is not None and self._watch.stuck:
            self._watch.check()  # logs the path answered again without waiting for a probe

    def _ask_catch_up(self) -> Any:
        """The future of a read queued behind the group that got no answer, or None when the
        Allocator cannot be asked now (the supervisor's status says why)."""
        try:
            return self._allocator.ask(GetResourcePluginOptions(), block=False)
        except Exception:
            return None


def _has_answered(future: Any) -> bool:
    """Whether the Allocator answered ``future``'s message (a reply or an error; a stopped
    actor's ``ActorDeadError`` too: the supervisor reports that)."""
    try:
        future.get(timeout=0)
    except pykka.Timeout:
        return False
    except Exception:
        return True
    return True
