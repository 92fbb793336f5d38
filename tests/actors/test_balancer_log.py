"""A line that repeats every round is logged once, then at most once per interval
(actors.balancer_log)."""

from __future__ import annotations

import logging

import pytest

from actors.balancer_log import RepeatedLine

LOG = logging.getLogger("tests.balancer_log")


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        pytest.param([("a", 0), ("a", 5), ("a", 10)], ["a"],
                     id="repeats within the interval are left out"),
        pytest.param([("a", 0), ("a", 5), ("a", 600)], ["a", "a (1 more times in the last 600 s)"],
                     id="after the interval it is said again with the count left out"),
        pytest.param([("a", 0), ("b", 5), ("a", 10)], ["a", "b", "a"],
                     id="a different line is said at once"),
        pytest.param([("a", 100), ("a", 50)], ["a", "a"],
                     id="a clock that stepped back says it again"),
    ],
)  # fmt: skip
def test_repeated_lines(
    caplog: pytest.LogCaptureFixture, lines: list[tuple[str, float]], want: list[str]
) -> None:
    line = RepeatedLine(LOG, logging.WARNING, interval_s=600)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        for text, now in lines:
            line.log(text, now)
    assert said(caplog) == want


def test_clearing_says_it_recovered_and_the_next_line_is_said_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    line = RepeatedLine(LOG, logging.WARNING, interval_s=600)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        line.clear("fine again")  # nothing was said: nothing to recover from
        line.log("a", 0)
        line.log("a", 5)
        line.clear("fine again")
        line.log("a", 10)
    assert said(caplog) == ["a", "fine again (after 1 more)", "a"]
