"""Which stored traces overlap a window (the dependencies' bound on the spans they read,
:func:`storage.trace_sql.overlapping_traces`) is answered from the traces that end at or after the window's start,
not from every trace of the kept weeks (issue 34: the lookup is sorted by trace ID, so the question read all of it,
75 ms for a 100M-span day and about seven times that for a week). Migration 0131's ``by_end`` projection holds each
lookup row's (Start, End) sorted by End. The week here is written as the lookup's view leaves it: one row per trace,
8 traces a second over 7 days (4.84M rows), trace ``n`` lasting ``n % 60`` s."""

from __future__ import annotations

import pytest
from prometheus_support import wait_until

from storage import trace_sql
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from testkit import read_plan, store_before

WEEK_START_S = 1_767_225_600
"""2026-01-01 00:00:00 UTC."""
TRACES_PER_SECOND = 8
SECONDS = 7 * 86_400
LAST_HOUR_S = WEEK_START_S + SECONDS - 3600
WINDOWS = [(LAST_HOUR_S, LAST_HOUR_S + 39), (LAST_HOUR_S + 3580, LAST_HOUR_S + 3599)]
"""The two stretches a dependencies read of the week's last hour takes raw: its first 40 s and its last 20 s."""
PARAMETERS = {
    name: second for at, (low, high) in enumerate(WINDOWS) for name, second in ((f"from_{at}", low), (f"to_{at}", high))
}


def _fill_week(store: ClickHouse) -> None:
    store.command(f"""
INSERT INTO otel_traces_trace_id_ts
SELECT hex(cityHash64(number)), toDateTime({WEEK_START_S} + intDiv(number, {TRACES_PER_SECOND})) AS start,
    start + number % 60
FROM numbers({TRACES_PER_SECOND * SECONDS})""")


def _expected() -> list[tuple[int, int, int]]:
    """(first start, last end, traces) of the traces overlapping each window, from the fill's own rule."""
    found = []
    for low, high in WINDOWS:
        spans = [
            (start, start + number % 60)
            for number in range((low - 60 - WEEK_START_S) * TRACES_PER_SECOND, TRACES_PER_SECOND * SECONDS)
            for start in [WEEK_START_S + number // TRACES_PER_SECOND]
            if start + number % 60 >= low and start <= high
        ]
        found.append((min(start for start, _ in spans), max(end for _, end in spans), len(spans)))
    return found


def _ranges(store: ClickHouse, projections: int = 1) -> list[tuple[int, ...]]:
    sql = f"{trace_sql.overlapping_traces(len(WINDOWS))} SETTINGS optimize_use_projections = {projections}"
    return [tuple(map(int, found)) for found in store.query_rows(sql, PARAMETERS)[0]]


def _plan(store: ClickHouse) -> tuple[str, int, int]:
    """The part the overlap question reads (the table or a projection) and its granules, selected and of all."""
    return read_plan(store, trace_sql.overlapping_traces(len(WINDOWS)), PARAMETERS)


def test_the_last_hours_overlaps_read_the_last_hours_traces(store: ClickHouse) -> None:
    _fill_week(store)

    source, selected, total = _plan(store)

    assert source == "by_end" and selected * 50 <= total, (source, selected, total)


@pytest.mark.both_layouts
def test_overlaps_answer_alike_through_the_projection_and_the_table(store: ClickHouse) -> None:
    _fill_week(store)

    assert _ranges(store) == _ranges(store, projections=0) == _expected()


def test_a_week_stored_before_the_projection_reads_the_last_hours_traces_once_upgraded(store: ClickHouse) -> None:
    # Migration 0132 builds the projection of the parts stored before it as a background mutation: until it is
    # built a part is read from the table itself, so the answer is the same all along.
    with store_before(store, 129) as old:
        _fill_week(old)
        assert _plan(old)[0] != "by_end"
        assert _ranges(old) == _expected()

        assert apply_migrations(old, up_to=132) == [130, 131, 132]
        wait_until(lambda: _plan(old)[0] == "by_end", 60, "the projection of the stored part")
        assert _ranges(old) == _expected()
