"""Opening a journal makes what recovery read durable (journal.writer): a record a crashed
process wrote but never fsynced is in the page cache, recovery replays it, and the new process
answers from it, so a power loss must not take it away afterwards.

Found by ``qrmd sim`` (seed 39: a crash inside a record's fsync, a restart answering kubelet at
that seq, a power loss, a recovery one record short). The disk is the simulation's model, the
one place that tells written bytes from synced ones.
"""

from __future__ import annotations

from random import Random

import pytest

from journal import Journal
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import SimCrash
from qrmd.sim.dst.storage import SimDisk, SimFileOps
from tests.journal.helpers import NODE, TOPOLOGY, cause_of, events_of

DIRECTORY = "/var/lib/qrmd/journal"


def open_on(disk: SimDisk) -> tuple[Journal, int]:
    journal, recovery = Journal.open(
        DIRECTORY,
        node_name=NODE,
        topology_fingerprint=TOPOLOGY,
        durability="always",
        fs=SimFileOps(disk),  # a new process: no descriptors, no lock
        clock=disk.clock,
    )
    return journal, recovery.last_seq


@pytest.mark.parametrize("seed", range(5))
def test_a_record_recovered_after_a_crash_survives_a_later_power_loss(seed: int) -> None:
    disk = SimDisk(Random(seed), VirtualClock())
    journal, _ = open_on(disk)
    for n in range(1, 4):
        journal.append(cause_of(n), events_of(n))
    disk.faults.crash_in_ops = 1  # the write of record 4 passes, its fsync never happens
    with pytest.raises(SimCrash):
        journal.append(cause_of(4), events_of(4))
    restarted, last_seq = open_on(disk)
    assert last_seq == 4  # the page cache kept it, and the new process answers from it
    restarted.close()
    disk.power_loss()
    _, after_power_loss = open_on(disk)
    assert after_power_loss == 4
