"""The simulated actors run on no thread, but pykka registers them as any actor: each test
leaves pykka's registry as it found it, so the daemon's tests that count running actors see
none of the simulation's."""

from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest


@pytest.fixture(autouse=True)
def _unregister_simulated_actors() -> Iterator[None]:
    before = set(pykka.ActorRegistry.get_all())
    yield
    for ref in pykka.ActorRegistry.get_all():
        if ref not in before:
            ref.actor_stopped.set()
            pykka.ActorRegistry.unregister(ref)
