"""The composition root stays small (DESIGN.md "Layout"): ``qrmd/`` holds the CLI, the
daemon, the configuration, the subsystem protocol, logging and the version, and every
subsystem lives in its own package; a deferred import is the exception, with its reason; the
stand-ins for peers and for the host live apart, in ``qrmd/sim``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("policy", "journal", "machines", "actors", "wire", "qrmd")
#: The root's own modules besides ``__init__`` and ``__main__``.
MAX_ROOT_MODULES = 8
#: Imports deferred into a function: an optional extra, a parser only one input needs (the
#: config file's YAML and TOML), or code only a start-up path that is rarely taken needs (the
#: take-over of katalyst-agent's checkpoint, importlib.metadata where no metadata directory is
#: found), or the metrics registry and endpoint with their prometheus_client, which only
#: ``--metrics-address`` needs (two in the daemon), ``transitions`` for a machine that fires or
#: registers models (the daemon only steps tables), ``fractions`` for a CPU quantity (the
#: kubelet's reserved CPUs, an SNB pod's aggregated requests), the collectors of the balancer,
#: CPU pressure eviction and the advisor link (prometheus_client, asked for once kubelet is
#: served), prometheus_client's text parser and the HTTP client of the two scraping sources
#: (only a ``prometheus`` source needs them), the pod source's latency histogram and the
#: metric families of the pod source and the checkers (prometheus_client, at the first fetch
#: or scrape, after kubelet is served), the advisor's decision code in the decision table and
#: the journal cause (only a node with sys-advisor decides on its answers): a restart to
#: serving pays for every module it imports.
MAX_DEFERRED_IMPORTS = 21
DEFERRED = re.compile(r"#\s*noqa:\s*PLC0415")


def test_the_root_holds_at_most_eight_modules() -> None:
    modules = {
        p.name for p in (ROOT / "qrmd").glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    }
    assert len(modules) <= MAX_ROOT_MODULES, sorted(modules)


def test_each_subsystem_is_a_package_with_its_settings_and_wiring() -> None:
    for name in ("store", "cpu_plugin", "advisor", "pods", "balancer", "cpu_pressure"):
        package = ROOT / "qrmd" / name
        assert (package / "settings.py").is_file(), name
        assert (package / "subsystem.py").is_file(), name


def test_deferred_imports_are_few_and_each_says_why() -> None:
    deferred = []
    for folder in PRODUCTION:
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                if DEFERRED.search(line):
                    reason = DEFERRED.split(line, 1)[1].strip() or lines[number - 2].strip()
                    where = f"{path.relative_to(ROOT)}:{number}"
                    assert reason.startswith(("(", "#")), f"{where}: say why it is deferred"
                    deferred.append(where)
    assert len(deferred) <= MAX_DEFERRED_IMPORTS, deferred


#: A class named as a stand-in: ``SimulatedNumaMetrics``, ``KubeletSimulator``.
STAND_IN = re.compile(r"^class (Simulated\w*|\w*Simulator)\b", re.MULTILINE)


def test_the_stand_ins_live_in_qrmd_sim() -> None:
    """A simulator outside ``qrmd/sim`` is one production code could import (the import
    contracts in pyproject.toml guard ``qrmd.sim`` only)."""
    sim = ROOT / "qrmd" / "sim"
    found = [
        f"{path.relative_to(ROOT)}: {match.group(1)}"
        for folder in PRODUCTION
        for path in sorted((ROOT / folder).rglob("*.py"))
        if sim not in path.parents
        for match in STAND_IN.finditer(path.read_text())
    ]
    assert found == []
