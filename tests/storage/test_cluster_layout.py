"""The cluster layout (``storage.layout``): the DDL a replicated cluster runs, checked with ClickHouse's own parser;
one node unchanged; and, on the two-shard harness (``tests/cluster_kit.py``), one trace per shard, each span stored
once per shard by the checked insert, and a node that lost a table caught up by applying the migrations again."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from cluster_kit import LAYOUT, local_tables
from pipeline.pipeline_support import Span, otlp_request, vllm_agent_trace

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from storage import analysis_sql, payloads
from storage.clickhouse import ClickHouse
from storage.layout import (
    KEEPER_PATH,
    SINGLE_NODE,
    TRACE_SHARDING_KEY,
    Layout,
    UnrenderableMigration,
    ledger_statement,
    mutation_statement,
    render_statement,
)
from storage.migrations import LEDGER_DDL, apply_migrations, migration_files, pending_migrations, render
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.schema import with_tenant
from storage.writer import OnceWriter

REPLICATED = Layout("hotspan")
DATABASE = "otel"


def _format(ch: ClickHouse, sql: str) -> str:
    """``sql`` as ClickHouse's parser reads it back (``formatQuery``); raises on a syntax error."""
    return str(ch.query_rows("SELECT formatQuery({sql:String})", {"sql": sql})[0][0])


def _replicated_statements() -> list[str]:
    statements = [ledger_statement(LEDGER_DDL, REPLICATED)]
    for _, _, sql in migration_files():
        statements += render_statement(render(sql, 7), REPLICATED, DATABASE)
    return statements


def test_one_node_runs_every_migration_as_written() -> None:
    for _, _, sql in migration_files():
        assert render_statement(render(sql, 0), SINGLE_NODE, DATABASE) == [render(sql, 0)]
    assert ledger_statement(LEDGER_DDL, SINGLE_NODE) == LEDGER_DDL


def test_replicated_cluster_ddl_parses_and_places_every_table(store: ClickHouse) -> None:
    statements = _replicated_statements()
    formatted = [_format(store, statement) for statement in statements]
    ddl = [text for text in formatted if not text.startswith("INSERT")]
    assert ddl and all(f"ON CLUSTER {REPLICATED.cluster}" in text for text in ddl)
    assert not any("ON CLUSTER" in text for text in formatted if text.startswith("INSERT"))

    engines = re.findall(r"ENGINE = (\w+)\(([^)]*)\)", "\n".join(formatted))
    replicated = [(engine, args) for engine, args in engines if engine.startswith("Replicated")]
    assert {engine for engine, _ in replicated} == {
        "ReplicatedMergeTree",
        "ReplicatedReplacingMergeTree",
        "ReplicatedAggregatingMergeTree",
    }
    # Every shard table has its Keeper path per shard and its replica name from the servers' macros; the ledger
    # one path for the whole cluster.
    shard_tables = [args for _, args in replicated if "{shard}" in args]
    assert all(args.startswith(f"'{KEEPER_PATH}', '{{replica}}'") for args in shard_tables)
    assert len(shard_tables) == len(local_tables())
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{database}/{table}', '{replica}')" in formatted[0]
    distributed = dict(
        re.findall(rf"Distributed\('{REPLICATED.cluster}', '{DATABASE}', '(\w+)', (.+)\)", "\n".join(ddl))
    )
    assert distributed["otel_traces_local"] == TRACE_SHARDING_KEY
    untraced = (
        "hotspan_red_minutes_local",
        "hotspan_service_graph_minutes_local",
        "hotspan_incidents_local",
        "hotspan_dependency_minutes_local",
        "hotspan_dependency_coverage_local",
        "hotspan_dependency_refreshes_local",
    )
    assert all(distributed[table] == TRACE_SHARDING_KEY for table in distributed if table not in untraced)
    # Tables holding no trace are sharded at random; readers of incidents take each one's newest version across
    # shards (storage.incident_sql.INCIDENTS).
    assert all(distributed[table] == "rand()" for table in untraced)
    # Views read and fill local tables, so they run on the shard that stored the rows.
    views = [
        text for text in ddl if text.startswith(("CREATE MATERIALIZED VIEW", "ALTER TABLE hotspan_red_minutes_mv"))
    ]
    # trace-ID lookup, arrivals, RED (and its first-copies query), service graph, engine, summaries by time
    assert len(views) == 7
    assert all(re.search(r"FROM \w+_local\b", text) for text in views)
    assert all(re.search(r"\bTO \w+_local\b", text) for text in views if text.startswith("CREATE"))
    # TTL survives the rendering.
    assert "TTL toDateTime(Timestamp) + toIntervalDay(7)" in formatted[1]


def test_a_statement_without_a_cluster_rule_is_refused() -> None:
    with pytest.raises(UnrenderableMigration, match="no cluster rule"):
        render_statement("DROP TABLE otel_traces", REPLICATED, DATABASE)
    with pytest.raises(UnrenderableMigration, match="no replicated variant"):
        render_statement("CREATE TABLE IF NOT EXISTS t (a UInt8) ENGINE = Log", REPLICATED, DATABASE)


def test_deletes_reach_each_shards_own_table(store: ClickHouse) -> None:
    """Tail sampling's deletes and the payload deletion's mutation: ClickHouse deletes from and mutates MergeTree
    tables only, not through ``Distributed``."""
    for sql in (analysis_sql.DELETE_TRACE_SPANS, analysis_sql.DELETE_TRACE_INDEX):
        assert mutation_statement(sql, SINGLE_NODE) == sql
        replicated = _format(store, mutation_statement(sql, REPLICATED))
        assert re.match(rf"DELETE FROM \w+_local ON CLUSTER {REPLICATED.cluster} WHERE", replicated), replicated
        assert _format(store, mutation_statement(sql, LAYOUT)).startswith("DELETE FROM otel_traces")
    erase = _format(store, mutation_statement(payloads.ERASE_PAYLOADS, REPLICATED))
    assert re.match(rf"ALTER TABLE otel_traces_local ON CLUSTER {REPLICATED.cluster}\s+\(UPDATE", erase), erase
    with pytest.raises(UnrenderableMigration, match="not a DELETE"):
        mutation_statement("SELECT 1", REPLICATED)


@pytest.mark.parametrize("layout", ["cluster"])
def test_every_trace_lives_on_one_shard_and_both_shards_hold_traces(store: ClickHouse) -> None:
    reader = ClickHouseTraceReader(store)
    spans = vllm_agent_trace(queue_ms=1, prefill_ms=2, decode_ms=3, completion_tokens=2, tenant="t")
    OnceWriter(store).store(tables=[pa.concat_tables(_batch(f"{index:032x}", spans) for index in range(1, 21))])
    shards = store.query_rows("SELECT TraceId, groupUniqArray(shardNum()) FROM otel_traces GROUP BY TraceId")
    assert len(shards) == 20 and all(len(found) == 1 for _, found in shards)
    assert {found[0] for _, found in shards} == {1, 2}
    assert store.query_rows("SELECT count() FROM otel_traces") == store.query_rows(
        f"SELECT count() FROM {LAYOUT.table('otel_traces')}"
    )
    assert reader.search(TraceQuery(limit=50), tenant="default").height == 20


@pytest.mark.both_layouts
def test_each_span_is_stored_once_per_shard(store: ClickHouse) -> None:
    trace_ids = [f"{index:032x}" for index in range(1, 9)]
    spans = [
        Span("0000000000000001", "", "api", "GET /", 0, 10),
        Span("0000000000000002", "0000000000000001", "db", "q", 1, 5),
    ]
    batch = pa.concat_tables(_batch(trace_id, spans) for trace_id in trace_ids)
    writer = OnceWriter(store)
    assert writer.store(tables=[batch]).stored == 16
    assert writer.store(tables=[batch]).stored == 0  # every span a repeat, on whichever shard holds its trace
    longer = [Span("0000000000000001", "", "api", "GET /", 0, 12), spans[1]]
    outcome = writer.store(tables=[pa.concat_tables(_batch(trace_id, longer) for trace_id in trace_ids)])
    assert (outcome.stored, outcome.replaced, outcome.repeated) == (8, 8, 8)

    reader = ClickHouseTraceReader(store)
    assert store.query_rows("SELECT count(), countIf(Version > 0) FROM otel_traces") == [(24, 8)]
    assert {reader.trace(trace_id, tenant="default").height for trace_id in trace_ids} == {2}
    assert reader.trace(trace_ids[0], tenant="default")["duration_ns"].to_list() == [12_000_000, 4_000_000]
    assert reader.search(TraceQuery(limit=50), tenant="default")["span_count"].to_list() == [2] * 8
    assert store.query_rows("SELECT sum(Calls) FROM hotspan_red_minutes") == [(16,)]


@pytest.mark.parametrize("layout", ["cluster"])
def test_applying_every_migration_again_catches_up_a_node_that_lost_a_table(store: ClickHouse) -> None:
    assert apply_migrations(store, reapply=True) == [version for version, _, _ in migration_files()]
    store.command(f"DROP TABLE {LAYOUT.table('otel_traces_trace_id_ts')}")
    store.command("DROP TABLE otel_traces_trace_id_ts_mv")
    assert pending_migrations(store) == []  # the ledger cannot tell: the node lost the table, not the ledger

    apply_migrations(store, reapply=True)
    OnceWriter(store).store(tables=[_batch("ab" * 16, [Span("0000000000000001", "", "api", "GET /", 0, 10)])])
    assert store.query_rows("SELECT TraceId FROM otel_traces_trace_id_ts") == [("ab" * 16,)]
    assert store.query_rows("SELECT count() FROM hotspan_schema_migrations FINAL")[0][0] == len(migration_files())


@pytest.mark.parametrize("layout", ["cluster"])
def test_the_harness_refuses_what_a_cluster_refuses(store: ClickHouse) -> None:
    """What keeps the harness honest: a plain IN over a Distributed subquery is denied as on a real cluster."""
    with pytest.raises(Exception, match="Double-distributed"):
        store.query_rows(
            "SELECT count() FROM otel_traces WHERE TraceId IN (SELECT TraceId FROM otel_traces)"
            " SETTINGS distributed_product_mode = 'deny'"
        )


def _batch(trace_id: str, spans: list[Span]) -> pa.Table:
    return with_tenant(to_batch(*request_from_json(otlp_request(trace_id, spans))).table, "default")
