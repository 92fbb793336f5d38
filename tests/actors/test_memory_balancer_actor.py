"""The MemoryBalancer through real pykka actors and the real StateStore: rounds journaled,
concurrent eviction polls served once (§13), a restart resuming from the journal (§6.1)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from actors.balancer_messages import (
    BalancerView,
    GetBalancerState,
    GetEvictPods,
    GetToken,
    RoundReport,
    Tick,
)
from actors.store_messages import GetSnapshot
from policy.balance import RoundResult
from tests.actors.balancer_store import balancer_on, populate_cpu, start_store
from tests.policy.balance.examples import EX2_PODS, NOW

ACTIVE = tuple(p.uid for p in EX2_PODS)


def test_rounds_through_the_store_and_a_restart_resumes_the_cool_down(tmp_path: Path) -> None:
    now = [NOW]
    store = start_store(tmp_path)
    try:
        populate_cpu(store)
        actor, _ = balancer_on(store, now)
        try:
            report = actor.ask(Tick(NOW), timeout=10)
            assert isinstance(report, RoundReport) and report.result is RoundResult.STORED
            assert report.advice is not None and report.advice.source_numa == 0
            assert {c.pod_uid for c in report.advice.migrate_containers} <= set(ACTIVE)
            offers = actor.ask(GetEvictPods(ACTIVE), timeout=10)
            assert [o.pod_uid for o in offers] == ["r1"]
            assert actor.ask(GetToken(), timeout=10) == ""
            view = actor.ask(GetBalancerState(), timeout=10)
            assert isinstance(view, BalancerView)
        finally:
            actor.stop()
        served = store.ask(GetSnapshot(), timeout=10)
        assert served.state.balance == view.state and served.seq == view.seq == 4
    finally:
        store.stop()

    store = start_store(tmp_path)
    try:
        recovered = store.ask(GetSnapshot(), timeout=10)
        assert recovered.state == served.state, "the journal rebuilds current and last"
        actor, _ = balancer_on(store, now)
        try:
            assert actor.ask(Tick(NOW + 10), timeout=10).result is RoundResult.SKIPPED
            assert actor.ask(GetEvictPods(ACTIVE), timeout=10) == ()
            assert actor.ask(Tick(NOW + 30), timeout=10).result is RoundResult.STORED
        finally:
            actor.stop()
    finally:
        store.stop()


def test_concurrent_eviction_polls_get_the_offer_exactly_once(tmp_path: Path) -> None:
    """§13: gRPC threads ask at once; the mailbox serialises them, one gets the pod."""
    store = start_store(tmp_path)
    try:
        populate_cpu(store)
        actor, _ = balancer_on(store, [NOW])
        try:
            actor.ask(Tick(NOW), timeout=10)
            answers: list[Any] = []
            barrier = threading.Barrier(8)

            def poll() -> None:
                barrier.wait()
                answers.append(actor.ask(GetEvictPods(ACTIVE), timeout=10))

            threads = [threading.Thread(target=poll) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            assert sorted(len(a) for a in answers) == [0] * 7 + [1]
        finally:
            actor.stop()
    finally:
        store.stop()


def test_a_told_tick_that_fails_does_not_stop_the_actor(tmp_path: Path) -> None:
    store = start_store(tmp_path)
    try:
        actor, core = balancer_on(store, [NOW])
        try:

            def broken() -> Any:
                raise RuntimeError("pod source crashed")

            core._ports = replace(core._ports, pods=broken)
            actor.tell(Tick(NOW))
            view = actor.ask(GetBalancerState(), timeout=10)
            assert view.metrics["rounds_failed_total"] == 1
            assert actor.is_alive()
        finally:
            actor.stop()
    finally:
        store.stop()


def test_unknown_messages_fail_the_asker_only(tmp_path: Path) -> None:
    store = start_store(tmp_path)
    try:
        actor, _ = balancer_on(store, [NOW])
        try:
            with pytest.raises(TypeError, match="no command str"):
                actor.ask("hello", timeout=10)
            assert actor.ask(GetToken(), timeout=10) == ""
        finally:
            actor.stop()
    finally:
        store.stop()
