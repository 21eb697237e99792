"""The reliability suite's size and its figures.

Every test here measures something issue 17 asks for (acknowledged vs stored across a ``kill -9``, duplicates after
re-sends, statuses under overload, 5xx under fuzzing, memory of a huge trace read) and reports it with the
``figure`` fixture; the figures are printed at the end of every run, passed or not, under "reliability figures".

Size: the CI form is small (seconds per test). ``HOTSPAN_RELIABILITY=long`` runs the long forms (minutes:
a 60 s storage outage, a million fuzzed payloads, a 1M-span trace); ``tests/reliability/README.md`` lists both.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from scale import LONG

_FIGURES: list[str] = []


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, object, str], None]:
    """``figure(name, value, goal)``: record a measured figure of this test (printed at the end of the run)."""

    def record(name: str, value: object, goal: str) -> None:
        _FIGURES.append(f"{request.node.name}: {name} = {value} (goal: {goal})")

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section(f"reliability figures ({'long' if LONG else 'CI'} form)")
        for line in _FIGURES:
            terminalreporter.write_line(line)
