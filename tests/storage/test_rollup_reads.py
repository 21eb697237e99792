"""Reads of the per-minute rollups over a window of every group read the window's granules, not every group's day
(issue 34: RED over 1 h at 100M spans took 1.1 s decoding a whole day of quantile states). The rollups are sorted
by group first, so an hour of 200 operations lies in every granule of the day; their ``by_time`` projections
(migrations 0101 and 0104) hold the same rows sorted by tenant and minute, and ClickHouse reads whichever needs
fewer granules. The days here are written as the rollups' materialized views leave them (one row per group and
minute, a quantile state of that minute's durations), 200 operations x 1,440 minutes, 36 granules."""

from __future__ import annotations

import pytest
from prometheus_support import wait_until

from storage import rollup_sql
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.reader import ClickHouseTraceReader
from storage.rollup_reader import RedQuery
from testkit import read_plan, store_before

DAY_START_S = 1_767_225_600
"""2026-01-01 00:00:00 UTC."""
OPERATIONS = 200
MINUTES = 1440
HOUR = {"start_ns": (DAY_START_S + 10 * 3600) * 10**9, "end_ns": (DAY_START_S + 11 * 3600) * 10**9 - 1}
"""10:00 to the last nanosecond before 11:00: the minutes 10:00 ... 10:59."""


DURATION_NS = f"toUInt64((number % {OPERATIONS} + 1) * 1000000 + intDiv(number, {OPERATIONS}) * 1000)"
"""Row ``number``'s duration (ns): operation ``number % OPERATIONS`` in minute ``number / OPERATIONS`` lasts 1 ms per
operation number, plus the minute in µs."""
MINUTE = f"toDateTime({DAY_START_S} + intDiv(number, {OPERATIONS}) * 60)"
"""Row ``number``'s minute."""


def _fill_red(store: ClickHouse) -> None:
    store.command(f"""
INSERT INTO hotspan_red_minutes
SELECT 'default', {MINUTE}, 'svc-' || toString(number % 20),
    'op-' || leftPad(toString(number % {OPERATIONS}), 3, '0'), 'Server', 1, 0, {DURATION_NS}, {DURATION_NS},
    arrayReduce('quantilesState(0.5, 0.95, 0.99)', [{DURATION_NS}]), map(toUInt32(2), toUInt64(1))
FROM numbers({OPERATIONS * MINUTES})""")


def _fill_service_graph(store: ClickHouse) -> None:
    state = f"arrayReduce('quantilesState(0.5, 0.95, 0.99)', [{DURATION_NS}])"
    store.command(f"""
INSERT INTO hotspan_service_graph_minutes
SELECT 'default', {MINUTE}, 'client-' || toString(number % 20),
    'server-' || leftPad(toString(number % {OPERATIONS}), 3, '0'), 'plain', 1, 0, {state}, {state}
FROM numbers({OPERATIONS * MINUTES})""")


def _granules(store: ClickHouse, table: str, keys: str) -> tuple[str, int, int]:
    """What a window read of every group of ``table`` (grouped by ``keys``) reads: the part it reads from (the
    table or a projection) and its granules, selected and of all, from ``EXPLAIN indexes = 1``."""
    sql = f"""
SELECT {keys}, sum(Calls) FROM {table}
WHERE {rollup_sql.MINUTES.replace("{{", "{").replace("}}", "}")} AND Tenant = 'default'
GROUP BY {keys}"""
    return read_plan(store, sql, HOUR)


@pytest.mark.both_layouts
def test_an_hour_of_red_by_operation_is_the_hours_rows(store: ClickHouse) -> None:
    _fill_red(store)
    reader = ClickHouseTraceReader(store)

    totals = reader.red(RedQuery("operation", **HOUR), tenant="default").totals.sort("operation")

    assert totals.height == OPERATIONS and not totals["overflow"].any()
    assert totals["calls"].to_list() == [60] * OPERATIONS
    # Operation n's calls in minute m (600 ... 659) last (n + 1) ms + m µs.
    assert totals["duration_max_ns"].to_list() == [(n + 1) * 10**6 + 659_000 for n in range(OPERATIONS)]
    assert totals["duration_sum_ns"].to_list() == [
        sum((n + 1) * 10**6 + m * 1000 for m in range(600, 660)) for n in range(OPERATIONS)
    ]
    assert totals["p50_ns"].to_list() == pytest.approx([(n + 1) * 10**6 + 629_500 for n in range(OPERATIONS)])


def test_an_hour_of_every_operation_reads_the_hours_granules(store: ClickHouse) -> None:
    _fill_red(store)

    assert _granules(store, "hotspan_red_minutes", "ServiceName, SpanName, SpanKind") == ("by_time", 3, 36)


def test_an_hour_of_every_edge_reads_the_hours_granules(store: ClickHouse) -> None:
    _fill_service_graph(store)

    assert _granules(store, "hotspan_service_graph_minutes", "Client, Server, ConnectionType")[:2] == ("by_time", 3)


def test_a_day_of_one_operation_still_reads_by_operation(store: ClickHouse) -> None:
    """The projection is taken where it reads less, not always: one operation's day is the table's own range."""
    _fill_red(store)
    plan = "\n".join(
        row[0]
        for row in store.query_rows(
            "EXPLAIN indexes = 1 SELECT sum(Calls) FROM hotspan_red_minutes"
            " WHERE Tenant = 'default' AND ServiceName = 'svc-7' AND SpanName = 'op-007'"
        )
    )
    assert "ReadFromMergeTree (by_time)" not in plan, plan


def test_a_day_stored_before_the_projection_reads_the_hours_granules_once_upgraded(store: ClickHouse) -> None:
    # Migration 0102 builds the projection of the parts stored before it as a background mutation: until it is
    # built a part is read from the table itself, so the rows read the same all along.
    with store_before(store, 99) as old:
        _fill_red(old)
        assert _granules(old, "hotspan_red_minutes", "ServiceName")[0] != "by_time"
        hour = ClickHouseTraceReader(old).red(RedQuery("service", **HOUR), tenant="default").totals

        assert apply_migrations(old, up_to=105) == [100, 101, 102, 103, 104, 105]
        wait_until(
            lambda: _granules(old, "hotspan_red_minutes", "ServiceName")[0] == "by_time",
            60,
            "the projection of the stored part",
        )
        assert ClickHouseTraceReader(old).red(RedQuery("service", **HOUR), tenant="default").totals.equals(hour)
