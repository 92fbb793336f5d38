"""The relay the kubelet servers tell about calls until the metrics registry is built."""

from __future__ import annotations

import threading

import pytest

from qrmd.status.observer import ObserverRelay

Call = tuple[str, float, str]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def observe(self, rpc: str, seconds: float, code: str) -> None:
        self.calls.append((rpc, seconds, code))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param([], [("Allocate", 0.001, "OK")], id="with nothing held every call goes on"),
        pytest.param(
            [("Allocate", 0.001, "OK"), ("RemovePod", 0.002, "INTERNAL")],
            [],
            id="calls answered before the registry are replayed in order",
        ),
        pytest.param(
            [("GetTopologyHints", 0.001, "OK")],
            [("Allocate", 0.003, "UNAVAILABLE")],
            id="held calls come before every later one",
        ),
    ],
)
def test_the_registry_sees_every_call_once_in_the_order_answered(
    before: list[Call], after: list[Call]
) -> None:
    relay, registry = ObserverRelay(), Recorder()
    for call in before:
        relay.observe(*call)
    assert relay.held == len(before)
    relay.attach(registry)
    for call in after:
        relay.observe(*call)
    assert registry.calls == before + after
    assert relay.held == 0


def test_calls_answered_while_it_attaches_are_neither_lost_nor_told_twice() -> None:
    relay, registry = ObserverRelay(), Recorder()
    go = threading.Barrier(5)

    def answer(thread: int) -> None:
        go.wait()
        for i in range(500):
            relay.observe(f"call-{thread}-{i}", 0.001, "OK")

    threads = [threading.Thread(target=answer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    go.wait()
    relay.attach(registry)
    for thread in threads:
        thread.join()
    assert sorted(call[0] for call in registry.calls) == sorted(
        f"call-{n}-{i}" for n in range(4) for i in range(500)
    )
