"""Every command's console: the terminal's width on a terminal, else a fixed wide one."""

from __future__ import annotations

import pytest
from rich.table import Table

from qrmd.console import NON_TERMINAL_WIDTH, make_console


def test_output_that_is_not_a_terminal_gets_the_fixed_width_and_tables_are_not_cut(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console = make_console()
    assert (console.is_terminal, console.width) == (False, NON_TERMINAL_WIDTH)
    table = Table("pool", "QoS", "containers")
    table.add_row("db-primary", "dedicated_cores", "db-primary/main, db-primary/exporter")
    table.add_row("reclaim", "reclaimed_cores", "batch-1/worker, batch-2/worker")
    console.print(table)
    out = capsys.readouterr().out
    assert "dedicated_cores" in out and "db-primary/exporter" in out and "…" not in out


def test_an_explicit_columns_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert make_console().width == 100


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        pytest.param({}, (False, False, False), id="an answer: stdout, no highlighting"),
        pytest.param(
            {"stderr": True, "highlight": True, "quiet": True},
            (True, True, True),
            id="progress: stderr, highlighted, silenced when asked",
        ),
    ],
)
def test_the_factory_passes_where_and_how_to_print(
    kwargs: dict[str, bool], want: tuple[bool, bool, bool]
) -> None:
    console = make_console(**kwargs)
    highlighted = bool(console.render_str("pid 4242 on /tmp/qrmd").spans)
    assert (console.stderr, highlighted, console.quiet) == want
