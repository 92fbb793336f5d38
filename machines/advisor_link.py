"""The link to sys-advisor: dial, push the containers, watch results, back off and retry.

Models the communication loop of cpu-policy.md §11.2 (wire.md §10.1):

1. **disabled** until started with the advisor enabled (``--enable-cpu-advisor``, reference
   ``cpu-resource-plugin-advisor``, default off; the link stays disabled without it), and
   again after stop.
2. **dialing**: confirm the plugin's own checkpoint socket answers (the reference's 5 s
   self-dial, §11.2 step 4a), then dial the advisor.
3. **syncing**: ``push_cpu_advisor`` — ``AddContainer`` for every non-pool container (§11.3).
   A container the advisor *refuses* (it answered with an error status) is logged and
   skipped; a *sick* advisor (no answer in time, UNAVAILABLE, the connection gone) ends the
   attempt (``push_failed``). The reference ends it at the first failure of either kind.
4. **watching**: the ListAndWatch stream is open; every calculation result received is
   forwarded to the Allocator (§11.5). A stream error ends the attempt, and so does a sick
   advisor met by a call outside the stream (the Allocator's AddContainer or RemovePod,
   ``advisor_sick``): kubelet's calls then answer without the advisor until it is back.
5. **backing_off**: every ended attempt waits before dialing again. The wait is exponential and
   sliding: 0.8 s, doubled per failure, capped at 30 s, no jitter; it starts again at 0.8 s when
   more than 2 minutes passed since the previous back-off started (§11.2 step 5, §14). That
   reset rule is the guard ``backoff_reset_due``; the caller carries out ``reset_backoff`` or
   ``double_backoff`` as the taken transition says, and fires ``retry`` when the wait is over.

The link holds no persistent state, so its transitions commit no journal events; the results
it forwards are committed by the Allocator.
"""

from __future__ import annotations

from functools import cache

from machines.lifecycle import Lifecycle
from machines.table import MachineTable, Transition

DISABLED = "disabled"
DIALING = "dialing"
SYNCING = "syncing"
WATCHING = "watching"
BACKING_OFF = "backing_off"

#: States in which an attempt is under way (where stop and failures apply).
ACTIVE = (DIALING, SYNCING, WATCHING, BACKING_OFF)

RESET_DUE = ("backoff_reset_due",)


def _failure(trigger: str, source: str) -> tuple[Transition, Transition]:
    """An ended attempt backs off, with the delay reset or doubled by the §11.2 rule."""
    return (
        Transition(trigger, (source,), BACKING_OFF, conditions=RESET_DUE,
                   actions=("reset_backoff",)),
        Transition(trigger, (source,), BACKING_OFF, unless=RESET_DUE,
                   actions=("double_backoff",)),
    )  # fmt: skip


TRANSITIONS = (
    Transition("start", (DISABLED,), DIALING, conditions=("advisor_enabled",)),
    Transition("connected", (DIALING,), SYNCING),
    *_failure("dial_failed", DIALING),
    Transition("synced", (SYNCING,), WATCHING),
    *_failure("push_failed", SYNCING),
    Transition("receive_result", (WATCHING,), WATCHING, actions=("forward_result",)),
    *_failure("stream_failed", WATCHING),
    *_failure("advisor_sick", WATCHING),
    Transition("retry", (BACKING_OFF,), DIALING),
    Transition("stop", ACTIVE, DISABLED),
)

TABLE = MachineTable(
    name="advisor_link",
    title="Advisor link (sys-advisor)",
    states=(DISABLED, DIALING, SYNCING, WATCHING, BACKING_OFF),
    initial=DISABLED,
    final=(),
    transitions=TRANSITIONS,
    glossary=(
        (
            "advisor_enabled",
            "--enable-cpu-advisor is on (reference cpu-resource-plugin-advisor; default off)",
        ),
        (
            "backoff_reset_due",
            "more than 2 minutes passed since the previous back-off started (§11.2 step 5)",
        ),
        ("reset_backoff", "wait 0.8 s before the next attempt"),
        ("double_backoff", "wait twice the previous delay, at most 30 s, no jitter"),
        ("forward_result", "hand the calculation result to the Allocator, which applies it"),
    ),
    summary=(
        "The CPU plugin's connection to sys-advisor (cpu-policy.md §11.2, wire.md §10.1): "
        "dial, push every container, watch calculation results; a failed attempt, a broken "
        "stream or a sick advisor backs off 0.8 s doubling to 30 s, reset after 2 minutes, "
        "then dials again."
    ),
)


@cache
def lifecycle() -> Lifecycle:
    """The advisor-link machine definition."""
    return Lifecycle(TABLE)
