"""The image's supply chain (deploy/Dockerfile, deploy/requirements.lock): every dependency and
build tool comes pinned, with hashes, from the lock; every pin satisfies pyproject.toml; no
pip call in the recipe reaches an index without checking hashes."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "deploy" / "requirements.lock"


def locked() -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of every pin in the lock."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    pins: dict[str, tuple[str, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split()
        name, _, version = spec.partition("==")
        assert version, f"{spec} is not pinned with =="
        hashes = [o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash=")]
        pins[canonicalize_name(name)] = (version, hashes)
    return pins


def project_requirements() -> list[Requirement]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*meta["project"]["dependencies"], *meta["build-system"]["requires"]]
    return [Requirement(text) for text in wanted]


@pytest.mark.parametrize("requirement", project_requirements(), ids=str)
def test_the_lock_pins_a_version_pyproject_accepts(requirement: Requirement) -> None:
    version, _ = locked()[canonicalize_name(requirement.name)]
    assert requirement.specifier.contains(version, prereleases=True), (requirement, version)


def test_every_pin_carries_sha256_hashes() -> None:
    for name, (_, hashes) in locked().items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


def pip_calls() -> list[list[str]]:
    text = (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    calls = []
    for line in text.splitlines():
        if line.startswith("RUN "):
            for command in line.removeprefix("RUN ").split("&&"):
                words = shlex.split(command)
                if words[:3] == ["python", "-m", "pip"]:
                    calls.append(words[3:])
    return calls


def test_every_pip_call_checks_hashes_or_stays_offline() -> None:
    calls = pip_calls()
    assert [c[0] for c in calls] == ["download", "wheel", "install"]
    for call in calls:
        if "--no-index" in call:
            continue
        # The one call that reaches an index takes the lock, wheels only, every hash checked.
        assert {"--require-hashes", "--only-binary=:all:"} <= set(call), call
        assert call[call.index("-r") + 1] == "requirements.lock", call
    text = (REPO / "deploy" / "Dockerfile").read_text()
    assert "COPY deploy/requirements.lock ./" in text
