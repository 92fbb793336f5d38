"""Crash-test writer: commits records in a loop and reports each acknowledged seq on stdout.

Run as a separate process (``python tests/journal/crash_writer.py DIR``) and killed with SIGKILL
at random moments by ``test_crash.py`` and ``bench/bench_journal.py``. It prints
``start <last recovered seq>`` once the journal is open, then one line per acknowledged seq,
written with ``os.write`` so that nothing sits in a buffer: every seq printed was acknowledged
(and, with durability ``always``, fsynced) before it was printed.

The payloads are a function of the seq, so the checker knows what every record must hold, and
the "state" (a count and a running total) is checkpointed, so recovery from a checkpoint plus
the records after it can be checked against the same function.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from journal import Journal, Recovery

NODE = "crash-node"
TOPOLOGY = "synthetic:cpus=16,sockets=2,numas=4"


def value_of(seq: int) -> int:
    return (seq * 7919) % 1000


def cause_of(seq: int) -> dict[str, Any]:
    return {"rpc": "Allocate", "pod_uid": f"pod-{seq}", "container": "main"}


def events_of(seq: int) -> list[Any]:
    """Three events per record: a record is only whole if all three are there."""
    return [
        {"kind": "container_allocated", "seq": seq, "value": value_of(seq)},
        {"kind": "pool_set", "blob": "x" * (seq % 97)},
        {"kind": "ramp_up_finished", "seq": seq},
    ]


def initial_state() -> dict[str, int]:
    return {"count": 0, "total": 0}


def apply(state: dict[str, int], events: list[Any]) -> dict[str, int]:
    return {"count": state["count"] + 1, "total": state["total"] + events[0]["value"]}


def expected_state(seq: int) -> dict[str, int]:
    return {"count": seq, "total": sum(value_of(n) for n in range(1, seq + 1))}


def recovered_state(recovery: Recovery) -> dict[str, int]:
    state = recovery.checkpoint_state if recovery.checkpoint_state is not None else initial_state()
    for record in recovery.records:
        state = apply(state, record.events)
    return dict(state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory")
    parser.add_argument("--durability", default="always", choices=["always", "none"])
    parser.add_argument("--segment-max-bytes", type=int, default=8192)
    parser.add_argument("--checkpoint-every", type=int, default=40)
    parser.add_argument("--limit", type=int, default=0, help="stop after this many commits")
    args = parser.parse_args()
    journal, recovery = Journal.open(
        args.directory,
        node_name=NODE,
        topology_fingerprint=TOPOLOGY,
        durability=args.durability,
        segment_max_bytes=args.segment_max_bytes,
        checkpoint_every_records=args.checkpoint_every,
    )
    state = recovered_state(recovery)
    os.write(1, f"start {recovery.last_seq}\n".encode())
    commits = 0
    while not args.limit or commits < args.limit:
        seq = journal.last_seq + 1
        events = events_of(seq)
        assert journal.append(cause_of(seq), events) == seq
        state = apply(state, events)  # applied only after the append returned
        os.write(1, f"{seq}\n".encode())
        if journal.checkpoint_due():
            journal.write_checkpoint(seq, state)
        commits += 1
    journal.close()


if __name__ == "__main__":
    main()
