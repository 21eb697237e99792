"""Settings of one Arrow read travel in its own ``SETTINGS`` clause (``storage.clickhouse.with_settings``): the
budget of the query room's handle and the call's own settings reach the statement, the SQL's own clause holds, and
the embedded engine runs one statement, not the chDB driver's ``SET`` statements around it. A statement that
fails leaves the next reads of the handle whole, whatever failed, budgeted or not."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from storage.clickhouse import ClickHouse, ReadBudget, ReadLimitError, with_settings
from testkit import fewest_events


def test_a_budgeted_read_carries_the_budget_and_its_own_settings(store: ClickHouse) -> None:
    reads = store.budgeted(ReadBudget(time_s=12.5, memory_bytes=10**9))
    got = reads.query_arrow(
        "SELECT getSetting('max_execution_time') AS time_s, getSetting('max_memory_usage') AS memory,"
        " getSetting('max_threads') AS threads, getSetting('log_comment') AS comment SETTINGS max_threads = 3",
        settings={"max_threads": 5, "log_comment": "it's a \\ note"},
    ).to_pylist()
    assert got == [{"time_s": 12.5, "memory": 10**9, "threads": 3, "comment": "it's a \\ note"}]
    with pytest.raises(ReadLimitError) as refused:
        reads.query_arrow("SELECT number FROM numbers(1000)", settings={"max_result_rows": 10})
    assert refused.value.limit == "rows"


def test_a_budgeted_read_is_one_statement_on_the_engine(store: ClickHouse) -> None:
    reads = store.budgeted(ReadBudget())
    settings = {"max_result_rows": 5, "result_overflow_mode": "throw"}
    # ClickHouse's count of statements started, SET included. The read and the count itself; the driver's way: 11
    # (also a read of system.settings, four SETs, four resets).
    assert fewest_events(store, "Query", lambda: reads.query_arrow("SELECT 1", settings=settings)) == 2


def test_no_settings_leave_the_sql_as_it_is() -> None:
    assert with_settings("SELECT 1", {}) == "SELECT 1"
    assert with_settings("SELECT 1", {"max_threads": 2, "use_query_cache": True}) == (
        "SELECT 1\nSETTINGS max_threads = 2, use_query_cache = 1"
    )
    with pytest.raises(ValueError, match="plain identifier"):
        with_settings("SELECT 1", {"max_threads = 1; DROP TABLE t; --": 1})


FAILING: dict[str, Callable[[ClickHouse], object]] = {
    "Arrow read": lambda ch: ch.query_arrow("SELECT throwIf(number = 5, 'refused') AS x FROM numbers(10)"),
    "row read": lambda ch: ch.query_rows("SELECT throwIf(number = 5, 'refused') AS x FROM numbers(10)"),
    "command": lambda ch: ch.command("SELECT throwIf(1, 'refused')"),
    "insert": lambda ch: ch.insert_raw("hotspan_incidents", ["Tenant"], b"not Native", "Native"),
}
"""Statements that fail on the engine, one of each kind a handle runs."""


@pytest.mark.parametrize("failing", FAILING)
@pytest.mark.parametrize("budget", [None, ReadBudget()], ids=["unbudgeted", "budgeted"])
def test_a_failed_statement_leaves_the_next_reads_whole(
    store: ClickHouse, budget: ReadBudget | None, failing: str
) -> None:
    handle = store.budgeted(budget) if budget else store
    for _ in range(2):
        with pytest.raises(DatabaseError):
            FAILING[failing](handle)
        assert handle.query_rows("SELECT 'abc', 1") == [("abc", 1)]
        assert handle.query_arrow("SELECT 'abc' AS x").to_pylist() == [{"x": "abc"}]
