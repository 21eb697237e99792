"""What Hotspan's reads cost on a large store, on one node and through the two-shard ``Distributed`` layout
(issue 14, "Numbers").

The store: ``--spans`` generated spans (default 1,000,000; the issue's figure is ``--spans 10000000``) in traces of
10 spans, each the child of the one before and each on the next of 20 services (so every trace crosses services),
over a day; the stack's attribute shapes (model, token counts, tenant, route); 2 % errors. The RED rollup and the
trace-ID lookup fill from their materialized views as the rows go in. One analysis row per trace goes into
``hotspan_trace_summary`` (its stages as fixed shares of the root's duration), standing in for the trace pipeline,
which would take far longer than the reads at this size.

Timed, the median of ``--repeats`` runs after one warm-up, each through Hotspan's own reader (``storage``):

- point read: one row of ``otel_traces`` by its whole sorting key, with the columns a trace read returns (the floor
  a trace read is judged against: a trace's spans sit in as many granules as it has (service, span name) pairs);
- trace by ID, and beside it the trace-by-ID query Hotspan ran before issue 34 bounded it by the trace's time range
  (:func:`trace_before`); search by service + attribute + minimum duration over 1 h and over 24 h; the trace
  pipeline's read of a batch of consecutive traces (its default ``batch_traces``, 500), and beside it that read as
  it was before issue 34 read it once (:func:`traces_before`); RED by service over 1 h (the rollup), and beside it
  the same read from the rollup's own sorting (its ``by_time`` projection off: the read before migration 0101); stages
  p50/p95/p99 over 1 h (the summaries sorted by time), and beside it the same read of the summaries sorted by trace
  (:func:`stages_before`: the read before migration 0110); service dependencies over 1 h, and beside them the
  dependencies query Hotspan ran before issue 34 (:func:`dependencies_before`), and over 1 h and 24 h from the
  dependency rollup (``storage.dependency_rollup``, backfilled for the store's day first, its time printed) beside
  the raw query over the same window, on the same store in the same run.

Not timed: diagnosis over 15 min (it reads the per-span analysis, which only the real pipeline writes).
Then the store's compressed bytes per span and its compression ratio, beside the 8.6x that Jaeger's ClickHouse
backend publishes.

The cluster layout is ``tests/cluster_kit.py``'s: both shards are this process, each reading the whole shared local
table under a row filter, so a query there scans everything twice on the same cores; a real cluster splits the
scan over its machines. Its times bound a real cluster's from above, no more.

Prints the 1-minute load average beside each figure; the last lines are ``dependencies_1h_ms: N``,
``trace_by_id_over_point_read: X.XX`` (issue 14's goal: at most 5) and the same ratio of :func:`trace_before`.
Run: ``python benchmarks/queries.py [--spans 1000000] [--repeats 5] [--no-cluster] [--keep DIR]`` (about 2 minutes
for 1M spans on two shared cores; ``--keep`` builds the stores in ``DIR`` once and reuses them while ``--spans`` asks
for as many).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.clickhouse import ClickHouse

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)
sys.path.append(str(REPO / "tests"))

SPANS_PER_TRACE = 10
SERVICES = 20
DAY_NS = 86_400 * 1_000_000_000
HOUR_NS = 3_600 * 1_000_000_000
BASE_NS = 1_760_000_000_000_000_000
JAEGER_COMPRESSION = 8.6
"""Jaeger's ClickHouse backend's published compression ratio of its spans table."""

SPANS = """
INSERT INTO {table} (COLUMNS)
SELECT
    fromUnixTimestamp64Nano(toInt64({base:Int64} + intDiv(number, 10) * {spacing:Int64} + (number % 10) * 1000000)),
    lower(hex(cityHash64(intDiv(number, 10), 'a'))) || lower(hex(cityHash64(intDiv(number, 10), 'b'))),
    lower(hex(cityHash64(number, 'span'))),
    if(number % 10 = 0, '', lower(hex(cityHash64(number - 1, 'span')))),
    '',
    ['POST /v1/agent', 'invoke_agent planner', 'retrieve documents', 'embeddings bge', 'execute_tool search',
     'chat llama-3.1-8b', 'POST /v1/chat/completions', 'llm_request', 'SELECT', 'tokenize'][number % 10 + 1],
    if(number % 10 = 0, 'Server', 'Client'),
    'svc-' || toString((intDiv(number, 10) + number % 10) % 20),
    map('service.version', '1.4.2', 'host.name', 'node-' || toString(number % 8)),
    'bench', '0.1',
    map('gen_ai.request.model', ['llama-3.1-8b', 'qwen-2.5-7b', 'mistral-7b'][intDiv(number, 10) % 3 + 1],
        'gen_ai.usage.input_tokens', toString(number % 8000), 'gen_ai.usage.output_tokens', toString(number % 2000),
        'tenant_id', 'tenant-' || toString(intDiv(number, 10) % 50), 'http.route', '/v1/agent',
        'gen_ai.operation.name', 'chat'),
    toUInt64((10 - number % 10) * 1000000 + cityHash64(number, 'duration') % 50000000),
    if(cityHash64(number, 'error') % 50 = 0, 'Error', 'Unset'), '',
    [], [], [], [], [], [], [],
    'default',
    0
FROM numbers({rows:UInt64})
"""
"""``--spans`` spans into ``{table}``; ``COLUMNS`` stands for ``storage.trace_sql.STORED_COLUMNS``."""

SUMMARIES = """
INSERT INTO {table} (Tenant, Timestamp, TraceId, RootSpanId, RootService, RootName, DurationNs, SpanCount,
    ServiceCount, ErrorCount, HotspotCount, RequestTenant, Model, LlmCalls, TtftNs, TpotNs, StageNs, AnalysedSpans,
    Version)
SELECT Tenant, min(Timestamp), TraceId, argMin(SpanId, Timestamp), argMin(ServiceName, Timestamp),
    argMin(SpanName, Timestamp), max(Duration), count(), uniqExact(ServiceName), countIf(StatusCode = 'Error'), 0,
    any(SpanAttributes['tenant_id']), any(SpanAttributes['gen_ai.request.model']), 1,
    intDiv(max(Duration), 5), max(Duration) / 400,
    map('gateway', intDiv(max(Duration), 20), 'agent', intDiv(max(Duration), 10), 'retrieval', intDiv(max(Duration), 5),
        'llm.queue', intDiv(max(Duration), 10), 'llm.prefill', intDiv(max(Duration), 5),
        'llm.decode', max(Duration) - intDiv(max(Duration), 20) - 2 * intDiv(max(Duration), 10)
            - 2 * intDiv(max(Duration), 5)),
    count(), 1
FROM {source}
GROUP BY Tenant, TraceId
"""
"""One analysis row per trace of ``{source}`` into ``{table}`` (the pipeline's stand-in, module docstring)."""

POINT_READ = """
FROM otel_traces
WHERE ServiceName = {service:String} AND SpanName = {name:String}
  AND toDateTime(Timestamp) = toDateTime(fromUnixTimestamp64Nano({ts:Int64}))
  AND Timestamp = fromUnixTimestamp64Nano({ts:Int64})
LIMIT 1
"""
"""One row of ``otel_traces`` by its whole sorting key (ServiceName, SpanName, toDateTime(Timestamp), Timestamp),
after ``SELECT`` and the span columns a trace read returns (``storage.trace_sql.SPAN_COLUMNS``)."""


def dependencies_before() -> str:
    """The dependencies as Hotspan read them before issue 34, timed beside the reader's in the same run: children
    and their parents from ``otel_traces`` (through the ``Distributed`` tables on a cluster, joined on the
    initiator), grouped and joined by their string columns, not by hashes of them. A copy kept as the baseline."""
    from storage.trace_sql import IDENTITY, TENANT_FILTER

    return f"""
WITH children AS (
    SELECT TraceId, SpanId, argMax(ParentSpanId, Version) AS ParentSpanId, argMax(ServiceName, Version) AS ServiceName
    FROM otel_traces
    WHERE Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
      AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
      AND {TENANT_FILTER}
    GROUP BY {IDENTITY}
    HAVING ParentSpanId != ''
),
overlapping AS (
    SELECT min(Start) AS first, max(End) AS last
    FROM otel_traces_trace_id_ts
    WHERE End >= toDateTime(fromUnixTimestamp64Nano({{start_ns:Int64}}))
      AND Start <= toDateTime(fromUnixTimestamp64Nano({{end_ns:Int64}}))
)
SELECT p.ServiceName AS parent, c.ServiceName AS child, count() AS call_count
FROM children AS c
INNER JOIN (
    SELECT DISTINCT TraceId, SpanId, ServiceName
    FROM otel_traces
    WHERE {TENANT_FILTER}
      AND toDateTime(Timestamp) >= (SELECT first FROM overlapping)
      AND toDateTime(Timestamp) <= (SELECT last FROM overlapping)
) AS p ON c.TraceId = p.TraceId AND c.ParentSpanId = p.SpanId
WHERE p.ServiceName != c.ServiceName
GROUP BY parent, child
ORDER BY parent, child
"""


def latest_copy_before(where: str) -> str:
    """The condition by which Hotspan's full-span reads kept each span's latest copy before issue 34
    (``storage.trace_sql.LATEST_COPY`` then): the rows whose identity and ``Version`` are among each identity's
    highest of the rows meeting ``where``, a subquery that finds those rows a second time. A copy kept as the
    baseline of :func:`trace_before` and :func:`traces_before`."""
    from storage.trace_sql import IDENTITY

    return f"""({IDENTITY}, Version) IN (
        SELECT {IDENTITY}, max(Version)
        FROM otel_traces
        WHERE {where}
        GROUP BY {IDENTITY}
    )"""


def stages_before() -> str:
    """Stage percentiles over a window as Hotspan read them before issue 34 stored the summaries sorted by time
    (migration 0110), timed beside the reader's in the same run: the same query over ``hotspan_trace_summary``,
    sorted by trace, whose every granule holds some of any hour's requests."""
    from storage import analysis_sql

    conditions = " AND ".join(
        [analysis_sql.OWNER_FILTER, analysis_sql.SUMMARY_FILTERS["start_ns"], analysis_sql.SUMMARY_FILTERS["end_ns"]]
    )
    sql = analysis_sql.STAGE_PERCENTILES.format(group="''", conditions=conditions)
    return sql.replace("hotspan_trace_summary_by_time", "hotspan_trace_summary")


def trace_before() -> str:
    """Trace by ID as Hotspan read it before issue 34, timed beside the reader's in the same run: the trace found by
    its ID alone (the trace-ID bloom filter of every granule of every day), twice: in the read and again in its
    latest-copy subquery (:func:`latest_copy_before`). A copy kept as the baseline."""
    from storage.trace_sql import IDENTITY, SPAN_COLUMNS, TENANT_FILTER

    where = f"TraceId = {{trace_id:String}} AND {TENANT_FILTER}"
    return f"""
SELECT{SPAN_COLUMNS}
FROM otel_traces
WHERE {where} AND {latest_copy_before(where)}
ORDER BY start_time_unix_nano, span_id, kind, name
LIMIT 1 BY {IDENTITY}
"""


def traces_before() -> str:
    """The trace pipeline's read of a batch of traces (``storage.analysis_sql.TRACES_SPANS``) as it was before it
    read them once, timed beside it in the same run: the batch found again by its latest-copy subquery
    (:func:`latest_copy_before`). A copy kept as the baseline."""
    from storage.trace_sql import IDENTITY, SPAN_COLUMNS, TENANT, TENANT_FILTER, in_time_range_of

    ids = "{trace_ids:Array(String)}"
    where = f"TraceId IN {ids} AND {TENANT_FILTER} AND {in_time_range_of(ids)}"
    return f"""
SELECT{SPAN_COLUMNS},
    {TENANT} AS tenant
FROM otel_traces
WHERE {where} AND {latest_copy_before(where)}
ORDER BY trace_id, start_time_unix_nano, span_id, kind, name
LIMIT 1 BY {IDENTITY}
"""


def settle(ch: ClickHouse) -> None:
    """Wait until ``ch``'s database runs no mutation: a kept store upgraded in place by a migration that builds a
    projection of its stored parts (0102, 0105) builds it first, so no read is timed beside that work."""
    running = "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND NOT is_done"
    while ch.query_rows(running)[0][0]:
        time.sleep(1)


def load(ch: ClickHouse, spans: int, local: Callable[[str], str]) -> float:
    """Fill ``ch``'s store with the generated spans and summaries (``local`` names the table a row is written
    to: the shard's own on the cluster layout); returns the seconds it took."""
    from storage.trace_sql import STORED_COLUMNS

    started = time.perf_counter()
    spacing = DAY_NS // max(1, spans // SPANS_PER_TRACE)
    ch.command(
        SPANS.replace("COLUMNS", STORED_COLUMNS).replace("{table}", local("otel_traces")),
        {"base": BASE_NS, "spacing": spacing, "rows": spans},
    )
    ch.command(SUMMARIES.replace("{table}", local("hotspan_trace_summary")).replace("{source}", local("otel_traces")))
    ch.command(f"OPTIMIZE TABLE {local('otel_traces')} FINAL")
    return time.perf_counter() - started


def measure(ch: ClickHouse, repeats: int) -> dict[str, tuple[float, float, float]]:
    """Each read of the module docstring on ``ch``'s store: its median ms, the CPU ms this process spent per run
    (the warm-up included; the embedded engine runs in this process, so it is the read's own work, which other
    programs on the host do not change as they change the wall time) and the 1-minute load average right after."""
    import polars as pl

    from analysis import STAGES
    from benchmarks.dedup import median_ms
    from processors.pipeline.config import TracePipelineConfig
    from storage import trace_sql
    from storage.analysis_store import AnalysisFilter, ClickHouseAnalysisStore
    from storage.clickhouse import ReadBudget
    from storage.dependency_rollup import DependencyRollup, raw_calls
    from storage.reader import ClickHouseTraceReader, TraceQuery
    from storage.rollup_reader import ClickHouseRollupReader, RedQuery
    from storage.tenancy import tenant_parameters

    reader = ClickHouseTraceReader(ch)
    started = time.perf_counter()
    rollup = DependencyRollup(ch, margin_s=0, horizon_s=60)
    rollup.refresh()
    minutes = rollup.backfill(BASE_NS, BASE_NS + DAY_NS)
    print(f"dependency rollup: {minutes:,} minutes backfilled in {time.perf_counter() - started:.1f} s")
    middle = BASE_NS + DAY_NS // 2
    hour = {"start_ns": middle, "end_ns": middle + HOUR_NS}
    service, name, ts, trace_id = ch.query_rows(
        "SELECT ServiceName, SpanName, toUnixTimestamp64Nano(Timestamp), TraceId FROM otel_traces"
        " WHERE Timestamp >= fromUnixTimestamp64Nano({t:Int64}) ORDER BY Timestamp LIMIT 1",
        {"t": middle},
    )[0]
    # The pipeline analyses traces that went quiet together: consecutive ones, as its batches are.
    batch = [
        row[0]
        for row in ch.query_rows(
            "SELECT TraceId FROM otel_traces_trace_id_ts WHERE Start >= toDateTime(fromUnixTimestamp64Nano({t:Int64}))"
            " ORDER BY Start, TraceId LIMIT {n:UInt32}",
            {"t": middle, "n": TracePipelineConfig.batch_traces},
        )
    ]
    search = {
        "service": "svc-3",
        "attributes": (("gen_ai.request.model", "qwen-2.5-7b"),),
        "min_duration_ns": 40_000_000,
    }

    analysis = ClickHouseAnalysisStore(ch, STAGES)
    rollups = ClickHouseRollupReader(ch)

    class TableOrder(ReadBudget):
        """No budget, and the rollups read in their own sorting: what the reads were before their projections."""

        def settings(self) -> dict[str, object]:
            return {"optimize_use_projections": 0}

    rollups_before = ClickHouseRollupReader(ch.budgeted(TableOrder()))
    cases: dict[str, Callable[[], object]] = {
        "point read (sorting key)": lambda: ch.query_arrow(
            f"SELECT{trace_sql.SPAN_COLUMNS}{POINT_READ}", {"service": service, "name": name, "ts": ts}
        ),
        "trace by ID": lambda: reader.trace(trace_id, tenant="default"),
        "trace by ID before": lambda: pl.from_arrow(
            ch.query_arrow(trace_before(), {"trace_id": trace_id, **tenant_parameters("default")})
        ),
        "search 1 h": lambda: reader.search(TraceQuery(**search, **hour), tenant="default"),
        "search 24 h": lambda: reader.search(
            TraceQuery(**search, start_ns=BASE_NS, end_ns=BASE_NS + DAY_NS), tenant="default"
        ),
        "pipeline batch": lambda: reader.traces(batch, tenant="default"),
        "pipeline batch before": lambda: pl.from_arrow(
            ch.query_arrow(traces_before(), {"trace_ids": batch, **tenant_parameters("default")})
        ),
        "RED by service 1 h": lambda: rollups.red(RedQuery("service", **hour), tenant="default"),
        "RED by service 1 h before": lambda: rollups_before.red(RedQuery("service", **hour), tenant="default"),
        "stages p95 1 h": lambda: analysis.stage_percentiles(AnalysisFilter(**hour), "", tenant="default"),
        "stages p95 1 h before": lambda: ch.query_rows(
            stages_before(), {**hour, "stages": list(STAGES), **tenant_parameters("default")}
        ),
        "dependencies 1 h": lambda: reader.dependencies(hour["start_ns"], hour["end_ns"], tenant="default"),
        "dependencies 1 h raw": lambda: raw_calls(ch, hour["start_ns"], hour["end_ns"], tenant="default"),
        "dependencies before": lambda: ch.query_rows(dependencies_before(), {**hour, **tenant_parameters("default")}),
        "dependencies 24 h": lambda: reader.dependencies(BASE_NS, BASE_NS + DAY_NS, tenant="default"),
        "dependencies 24 h raw": lambda: raw_calls(ch, BASE_NS, BASE_NS + DAY_NS, tenant="default"),
    }
    figures = {}
    for label, run in cases.items():
        before = resource.getrusage(resource.RUSAGE_SELF)
        ms = median_ms(run, repeats)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        figures[label] = (ms, cpu_s * 1000 / (repeats + 1), os.getloadavg()[0])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans in the store (default 1000000)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument("--no-cluster", action="store_true", help="one node only")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the stores in this directory and reuse them when a later run asks for as many spans",
    )
    args = parser.parse_args()

    from cluster_kit import LAYOUT, open_engine, pool_database

    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    directory = args.keep or Path(tempfile.mkdtemp(prefix="hotspan-queries-"))
    directory.mkdir(parents=True, exist_ok=True)
    dsn = open_engine(directory, "kept" if args.keep else None)
    one_node = ClickHouse(dsn, "queries_kept" if args.keep else f"queries_{uuid.uuid4().hex[:8]}")
    built = directory / "built"
    # A kept store holds what its marker says only once its load finished: the marker is written last.
    holds = built.read_text() if built.exists() else ""
    wanted = f"{args.spans} spans" + ("" if args.no_cluster else ", two shards")
    reuse = args.keep is not None and holds in (wanted, f"{args.spans} spans, two shards")
    built.unlink(missing_ok=True)
    if not reuse:
        one_node.command(f"DROP DATABASE IF EXISTS {one_node.database}")
        one_node.command(f"CREATE DATABASE {one_node.database}")
    apply_migrations(one_node)
    settle(one_node)
    if not reuse:
        seconds = load(one_node, args.spans, lambda table: table)
        print(f"store: {args.spans:,} spans, {args.spans // SPANS_PER_TRACE:,} traces, built in {seconds:.0f} s")
    compressed, raw = one_node.query_rows(
        "SELECT sum(data_compressed_bytes), sum(data_uncompressed_bytes) FROM system.parts"
        " WHERE database = currentDatabase() AND table = 'otel_traces' AND active"
    )[0]
    local = measure(one_node, args.repeats)

    cluster: dict[str, tuple[float, float, float]] = {}
    if not args.no_cluster:
        with pool_database() as database:
            sharded = ClickHouse(dsn, database, LAYOUT)
            if not reuse:
                sharded.command(f"DROP DATABASE IF EXISTS {database}")
                sharded.command(f"CREATE DATABASE {database}")
            apply_migrations(sharded)
            settle(sharded)
            if not reuse:
                load(sharded, args.spans, LAYOUT.table)
            cluster = measure(sharded, args.repeats)
            if not args.keep:
                sharded.command(f"DROP DATABASE {database}")
    if args.keep:
        built.write_text(holds if reuse else wanted)

    print(f"{'median ms, CPU ms (load)':<26} {'one node':>22} {'2 shards':>22} {'ratio':>6}")
    for label, (ms, cpu_ms, busy) in local.items():
        line = f"{label:<26} {ms:>8.1f} {cpu_ms:>6.0f} ({busy:>4.1f})"
        if cluster:
            sharded_ms, sharded_cpu_ms, sharded_busy = cluster[label]
            line += f" {sharded_ms:>8.1f} {sharded_cpu_ms:>6.0f} ({sharded_busy:>4.1f}) {sharded_ms / ms:>6.2f}"
        print(line)
    print(
        f"otel_traces: {int(compressed) / args.spans:.1f} bytes per span compressed, compression "
        f"{int(raw) / int(compressed):.1f}x (Jaeger's ClickHouse backend publishes {JAEGER_COMPRESSION}x)"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"dependencies_24h_over_raw: {local['dependencies 24 h'][0] / local['dependencies 24 h raw'][0]:.3f}")
    print(f"dependencies_1h_ms: {local['dependencies 1 h'][0]:.0f}")
    point_ms = local["point read (sorting key)"][0]
    print(f"trace_by_id_over_point_read: {local['trace by ID'][0] / point_ms:.2f}")
    print(f"trace_by_id_before_over_point_read: {local['trace by ID before'][0] / point_ms:.2f}")


if __name__ == "__main__":
    main()
