"""``hotspan_engine_requests`` (migrations 0070-0072): filled from ``llm_request`` spans at insert, each span once,
and the backfill that brings in spans stored before the view existed, once however often it runs."""

from __future__ import annotations

from llm_request_spans import RUNS, export_request

from collector.ingest import Ingestor
from storage.clickhouse import ClickHouse
from storage.migrations import migration_files, migration_statements
from storage.writer import ClickHouseTraceWriter

COUNT = "SELECT count(), uniqExact(TraceId), sum(OutputTokens) FROM hotspan_engine_requests"
EXPECTED = (73, 73, 10 * 100 + 20 * 100 + 40 * 50 + 3 * 10)
"""The runs' 73 llm_request spans (their ``chat`` spans are not vLLM's) and their output tokens."""


def test_the_view_keeps_each_llm_request_once_and_the_backfill_restores_them_once(store: ClickHouse) -> None:
    ingestor = Ingestor(ClickHouseTraceWriter(store))
    for _ in range(2):
        ingestor.export(export_request(RUNS))
    assert store.query_rows(COUNT) == [EXPECTED]
    row = store.query_rows(
        "SELECT Model, MaxNumSeqs, EnablePrefixCaching, TensorParallelSize, E2eNs, TtftNs FROM hotspan_engine_requests"
        " ORDER BY Timestamp LIMIT 1"
    )
    assert row == [("llama-8b", "8", "true", "", 1e9, 0.2e9)]

    # Spans stored before the view existed: the backfill adds them while the table is empty, and only then.
    store.command("TRUNCATE TABLE hotspan_engine_requests")
    (backfill,) = [sql for version, _, sql in migration_files() if version == 72]
    for _ in range(2):
        for statement in migration_statements(store, backfill, ttl_days=0):
            store.command(statement)
        assert store.query_rows(COUNT) == [EXPECTED]
