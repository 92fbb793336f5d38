"""``qrmd demo`` tells only what happened, under planted timings (in process, ``--fast``).

The default demo once said the deleted pods went by ``RemovePod`` from the kubelet's garbage
collection while qrmd's residual checker, whose age (2 s) ran out before that collection
(every 3 s), had removed them. Two planted timings, each against the real daemon:

* a residual age shorter than the kubelet's garbage collection period: the story still holds,
  since deleted pods stay listed until their ``RemovePod`` (the journal says so);
* a kubelet whose garbage collection never comes within the demo's wait: the demo fails, with
  one error naming phase 4 and the pods, and the daemon is gone.

Slow (a real ``qrmd run`` each); marked ``slow``.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from qrmd.sim.demo.claims import journaled_causes
from qrmd.sim.demo.daemon_process import pid_is_alive
from qrmd.sim.demo.scenario import DemoError, DemoSettings, run_demo
from qrmd.sim.kubelet import Kubelet

pytestmark = pytest.mark.slow


def quiet_console() -> Console:
    return Console(file=io.StringIO(), width=160)


def test_a_residual_age_shorter_than_the_garbage_collection_period_keeps_the_story(
    tmp_path: Path,
) -> None:
    settings = DemoSettings(state_dir=tmp_path / "state", fast=True, residual_max_age="500ms")
    assert settings.reconcile_period_s > 0.5  # the planted timing: residual age < GC period
    result = run_demo(settings, quiet_console())
    shutil.rmtree(result.work_dir, ignore_errors=True)
    removals = [
        (c.rpc, c.cause.get("pod_uid"), c.residual_uids)
        for c in journaled_causes(tmp_path / "state")
        if c.rpc in ("RemovePod", "RemoveResidualPods") and c.events
    ]
    assert sorted(removals, key=str) == sorted(
        [
            ("RemovePod", "uid-api", ()),
            ("RemovePod", "uid-db-replica", ()),
            ("RemoveResidualPods", None, ("uid-batch-2",)),
        ],
        key=str,
    )


def test_a_garbage_collection_that_never_comes_fails_the_demo_naming_phase_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planted timing: the kubelet's garbage collection is later than the demo waits.
    monkeypatch.setattr(Kubelet, "collect_garbage", lambda self: [])
    console = quiet_console()
    with pytest.raises(DemoError) as failed:
        run_demo(DemoSettings(state_dir=tmp_path / "state", fast=True), console)
    message = str(failed.value)
    assert message.startswith(
        "phase 4, delete pods db-replica, api, batch-2 (the kubelet forgets batch-2's): "
        "the kubelet's garbage collection sent no successful RemovePod for uid-db-replica, "
        "uid-api within 12 s"
    )
    assert "killed qrmd run (pid" in message
    pid = int(message.rsplit("(pid ", 1)[1].rstrip(")"))
    assert not pid_is_alive(pid)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "CPUs back in the pools" not in out  # nothing was told that did not happen
