"""``qrmd journal export`` queried with DuckDB across two nodes, and ``qrmd journal report``
opened in headless Chromium (Debian's chromium and chromium-driver, driven by selenium)."""

from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from qrmd.cli import main
from tests.qrmd.offline.scenario import (
    T0,
    TOPOLOGY_SPEC,
    Scenario,
    refuse_advice,
    write_scenario,
)

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two nodes' journals exported to ``fleet/node-a.parquet`` and ``fleet/node-b.parquet``;
    node-b's history starts an hour later and does not run the last three commands."""
    root = tmp_path_factory.mktemp("fleet")
    write_scenario(root / "a", node="node-a")
    write_scenario(root / "b", node="node-b", start=T0 + 3600)
    refuse_advice(root / "a", "node-a", ["blocks", "apply"])
    refuse_advice(root / "b", "node-b", ["validate"])
    for node in ("a", "b"):
        code = main(
            [
                "journal",
                "export",
                str(root / node),
                "--parquet",
                str(root / f"node-{node}.parquet"),
                "--topology",
                TOPOLOGY_SPEC,
            ]
        )
        assert code == 0
    return root


def query(fleet: Path, sql: str) -> list[tuple]:
    return duckdb.sql(sql.replace("FLEET", f"'{fleet}/*.parquet'")).fetchall()


def test_every_event_is_a_row_with_its_node_pod_and_cpuset(fleet: Path) -> None:
    rows = query(
        fleet,
        "SELECT node, seq, kind, cause_kind, pod, container, pool, cpuset, numa FROM FLEET "
        "WHERE node = 'node-a' AND seq = 4 ORDER BY event_index",
    )
    assert rows[0] == (
        "node-a",
        4,
        "ContainerAllocated",
        "Allocate",
        "default/db",
        "app",
        None,
        "3,10-11",
        [1],
    )
    assert (
        "node-a",
        4,
        "PoolSet",
        "Allocate",
        None,
        None,
        "reclaim",
        "1,4-9,12-15",
        [0, 2, 3],
    ) in rows
    (count,) = query(fleet, "SELECT count(*) FROM FLEET WHERE node = 'node-b'")[0]
    assert count == 23 + 1


def test_readme_query_which_nodes_moved_a_pod(fleet: Path) -> None:
    # docs/forensics.md, "Fleet": a move is a row whose cpuset differs from the pod's previous one
    rows = query(
        fleet,
        """
        SELECT node, count(*) AS moves FROM (
          SELECT node, cpuset,
                 lag(cpuset) OVER (PARTITION BY node, pod_uid, container ORDER BY seq) AS was
          FROM FLEET WHERE pod = 'default/web' AND cpuset IS NOT NULL)
        WHERE was IS NOT NULL AND cpuset <> was
        GROUP BY node ORDER BY node
        """,
    )
    assert rows == [("node-a", 2), ("node-b", 2)]


def test_readme_query_pool_sizes_over_time_across_nodes(fleet: Path) -> None:
    rows = query(
        fleet,
        "SELECT node, time, pool, cpus FROM FLEET WHERE kind = 'PoolSet' AND pool = 'share' "
        "ORDER BY time, node",
    )
    assert [(r[0], r[3]) for r in rows] == [
        ("node-a", 7),
        ("node-a", 7),
        ("node-b", 7),
        ("node-b", 7),
    ]
    assert rows[2][1].timestamp() - rows[0][1].timestamp() == 3600


def test_readme_query_advisor_refusals_per_node(fleet: Path) -> None:
    rows = query(
        fleet,
        "SELECT node, count(*) AS refusals FROM FLEET WHERE kind = 'AdvisorResponseRefused' "
        "GROUP BY node ORDER BY refusals DESC",
    )
    assert rows == [("node-a", 2), ("node-b", 1)]


def test_export_refuses_a_journal_without_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "export", str(tmp_path), "--parquet", str(tmp_path / "x.parquet")])
    assert code == 2 and "holds no journal segment" in capsys.readouterr().err


# -- report ------------------------------------------------------------------------------------


def chromium_driver():  # type: ignore[no-untyped-def]
    webdriver = pytest.importorskip("selenium.webdriver")
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        missing = "Debian's chromium and chromium-driver are not installed (.ci/run installs them)"
        if os.environ.get("CI"):
            pytest.fail(missing)  # CI installs them: missing there is a broken set-up
        pytest.skip(missing)
    service = pytest.importorskip("selenium.webdriver.chrome.service")

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=service.Service(driver), options=options)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    scenario: Scenario = write_scenario(root / "journal")
    out = root / "report.html"
    code = main(
        [
            "journal",
            "report",
            str(scenario.directory),
            "--html",
            str(out),
            "--topology",
            TOPOLOGY_SPEC,
        ]
    )
    assert code == 0
    return out


class _Fetches(HTMLParser):
    """Every URL the page's markup would load (scripts, styles, images, frames)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value and tag in ("script", "link", "img", "iframe"):
                self.urls.append(value)


def test_the_report_is_one_page_that_needs_no_network(report: Path) -> None:
    page = report.read_text(encoding="utf-8")
    fetches = _Fetches()
    fetches.feed(page)
    assert fetches.urls == []
    assert page.count('class="plotly-graph-div"') == 4


def test_the_report_draws_its_charts_in_chromium_without_console_errors(
    report: Path, tmp_path: Path
) -> None:
    browser = chromium_driver()
    try:
        browser.get(report.as_uri())
        charts = browser.find_elements("css selector", ".plotly-graph-div .main-svg")
        titles = browser.execute_script(
            "return [...document.querySelectorAll('.gtitle')].map(t => t.textContent)"
        )
        traces = browser.execute_script(
            "return [...document.querySelectorAll('.plotly-graph-div')].map(d => d.data.length)"
        )
        fetched = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        browser.save_screenshot(str(tmp_path / "report.png"))
    finally:
        browser.quit()
    assert severe == [] and fetched == []
    assert len(charts) >= 4
    assert titles == ["CPUs per NUMA node", "Pool sizes", "Balance rounds", "Event timeline"]
    assert traces[0] == 4 and traces[1] == 3  # four NUMA nodes; reserve, reclaim, share
    assert (tmp_path / "report.png").stat().st_size > 10_000
