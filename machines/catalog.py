"""Every lifecycle of qrmd, in the order documentation lists them (DESIGN.md, "State machines")."""

from __future__ import annotations

from machines import advisor_link, balance_round, ramp_up, registration
from machines.table import MachineTable

TABLES: tuple[MachineTable, ...] = (
    ramp_up.TABLE,
    balance_round.ROUND,
    balance_round.WINDOWS,
    advisor_link.TABLE,
    registration.TABLE,
)


def table_named(name: str) -> MachineTable:
    """The machine called ``name``.

    Raises:
        LookupError: no machine has that name; the message lists the names.
    """
    for table in TABLES:
        if table.name == name:
            return table
    known = ", ".join(t.name for t in TABLES)
    raise LookupError(f"no state machine named {name!r} (machines: {known})")
