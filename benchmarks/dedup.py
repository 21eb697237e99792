"""What storing each span once costs, on a large store: ingest, reads, bytes, and the alternative not taken.

Builds a store of ``--spans`` generated spans (default 1,000,000; traces of 20 spans over 5 services, 10 attributes
each, spread over ``--window-s`` seconds, a day by default; 1 % of the spans stored a second time as a later copy, as
re-exports leave them) in the embedded ClickHouse, then measures:

(a) ingest: groups of 20,000 realistic spans (``benchmarks/ingest.py``'s requests, converted by the compiled
    scanner) stored by ``storage.writer.OnceWriter`` (load into a temporary table, check against the stored
    copies, one ``INSERT ... SELECT``) against the plain ``Native`` insert it replaced; and the same groups stored
    again (every span a repeat: the cost of a re-send). The check reads the stored spans of the groups' trace IDs
    at their exact start times (a sorting-key column); ``--window-s 20`` puts every stored span inside the groups'
    20 s window, the case that halved the insert rate while the lookup matched a start range instead;
(b) reads, each with the latest-copy selection Hotspan runs and without it (the queries as they were): a trace by
    ID, a search (20 traces), 100 traces for the pipeline, the rolling hotspot quantile over an hour, Jaeger
    dependencies over the day; the median of ``--repeats`` runs;
(c) bytes on disk of ``otel_traces`` and of its ``Version`` column;
(d) the alternative: ``ReplacingMergeTree(Version)`` with the sorting key extended by the span's identity, read
    with ``FINAL``: the time to rebuild the table into it (what an upgrade would cost) and a search with ``FINAL``.

Prints the load average beside the figures; the last line is ``dedup_ingest_ratio: X.XX`` (OnceWriter's spans/s
over the plain insert's). Run: ``python benchmarks/dedup.py [--spans 1000000] [--repeats 5]`` (about 3 minutes
for 1M spans on two cores, 25 for 10M).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

DAY_NS = 86_400 * 1_000_000_000
BASE_NS = 1_760_000_000_000_000_000

GENERATE = """
INSERT INTO otel_traces (COLUMNS)
SELECT
    fromUnixTimestamp64Nano(toInt64({base:Int64} + intDiv(number, 20) * {spacing:Int64} + (number % 20) * 1000)),
    lower(hex(cityHash64(intDiv(number, 20), 'trace'))) || lower(hex(cityHash64(intDiv(number, 20), 'id'))),
    lower(hex(cityHash64(number, 'span'))),
    if(number % 20 = 0, '', lower(hex(cityHash64(number - number % 20, 'span')))),
    '',
    ['POST /v1/chat/completions', 'chat llama-3.1-8b', 'retrieve documents', 'execute_tool search',
     'llm_request', 'SELECT', 'tokenize'][number % 7 + 1],
    ['Server', 'Client', 'Internal'][number % 3 + 1],
    ['gateway', 'agent', 'retriever', 'vllm', 'tool-runner'][intDiv(number % 20, 4) + 1],
    map('service.version', '1.4.2', 'host.name', 'node-' || toString(number % 8)),
    'bench', '0.1',
    map('http.request.method', 'POST', 'gen_ai.request.model', 'llama', 'gen_ai.usage.input_tokens',
        toString(number % 8000), 'gen_ai.usage.output_tokens', toString(number % 2000), 'tenant_id',
        'tenant-' || toString(number % 20), 'server.port', '8000', 'network.protocol.version', '1.1',
        'gen_ai.operation.name', 'chat', 'gen_ai.provider.name', 'vllm', 'k', toString(number)),
    1000 + cityHash64(number, 'duration') % 2000000000,
    if(number % 50 = 0, 'Error', 'Unset'), '',
    [], [], [], [], [], [], [],
    'default',
    0
FROM numbers({rows:UInt64})
"""
"""``--spans`` generated rows (Version 0); ``COLUMNS`` stands for ``storage.trace_sql.STORED_COLUMNS``."""

RECOPY = """
INSERT INTO otel_traces (STORED) SELECT ROWS, 1 FROM otel_traces WHERE cityHash64(SpanId) % 100 = 0
"""
"""1 % of the spans again, as a later copy (``STORED``/``ROWS``: ``storage.trace_sql``'s column lists)."""

OLD_TRACE = """
SELECT * FROM otel_traces WHERE TraceId = {trace_id:String} AND Tenant = 'default' ORDER BY Timestamp, SpanId
"""
OLD_TRACES = """
WITH {trace_ids:Array(String)} AS ids
SELECT * FROM otel_traces WHERE TraceId IN ids AND Tenant = 'default'
  AND toDateTime(Timestamp) >= (SELECT min(Start) FROM otel_traces_trace_id_ts WHERE TraceId IN ids)
  AND toDateTime(Timestamp) <= (SELECT max(End) FROM otel_traces_trace_id_ts WHERE TraceId IN ids)
ORDER BY TraceId, Timestamp, SpanId
"""
OLD_SEARCH = """
WITH matched AS (
    SELECT TraceId, max(Timestamp) AS last_seen FROM otel_traces
    WHERE Tenant = 'default' AND ServiceName = 'gateway' GROUP BY TraceId ORDER BY last_seen DESC LIMIT 20
)
SELECT TraceId, count(), uniqExact(ServiceName), countIf(StatusCode = 'Error'), min(Timestamp)
FROM otel_traces WHERE TraceId IN (SELECT TraceId FROM matched) AND Tenant = 'default'
GROUP BY TraceId
"""
OLD_QUANTILES = """
SELECT ServiceName, SpanName, quantile(0.95)(Duration), count() FROM otel_traces
WHERE ServiceName IN ['gateway', 'agent'] AND Timestamp >= fromUnixTimestamp64Nano({start:Int64})
  AND Timestamp <= fromUnixTimestamp64Nano({end:Int64}) AND Tenant = 'default'
GROUP BY ServiceName, SpanName
"""
OLD_DEPENDENCIES = """
WITH children AS (
    SELECT DISTINCT TraceId, SpanId, ParentSpanId, ServiceName FROM otel_traces
    WHERE ParentSpanId != '' AND Tenant = 'default'
)
SELECT p.ServiceName, c.ServiceName, count() FROM children AS c
INNER JOIN (SELECT DISTINCT TraceId, SpanId, ServiceName FROM otel_traces WHERE Tenant = 'default') AS p
ON c.TraceId = p.TraceId AND c.ParentSpanId = p.SpanId
WHERE p.ServiceName != c.ServiceName GROUP BY 1, 2
"""
"""The reads as they were before every read kept the latest copy (Hotspan's main branch of issue 17)."""

RMT_TABLE = """
CREATE TABLE otel_traces_rmt AS otel_traces
ENGINE = ReplacingMergeTree(Version)
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp, Tenant, TraceId, SpanId, SpanKind)
"""
RMT_SEARCH = OLD_SEARCH.replace("FROM otel_traces", "FROM otel_traces_rmt FINAL")


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` runs of ``run`` (one warm-up run first), ms."""
    run()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans in the store (default 1000000)")
    parser.add_argument("--groups", type=int, default=6, help="20000-span groups per ingest figure (default 6)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per read figure (default 5)")
    parser.add_argument(
        "--window-s",
        type=int,
        default=86_400,
        help="seconds the store's spans spread over (default a day); the ingest groups start at its beginning and"
        " span 20 s, so --window-s 20 puts every stored span in their window",
    )
    args = parser.parse_args()

    from benchmarks.ingest import build_requests
    from collector.batch import DEFAULT_LIMITS
    from collector.native_writer import COLUMNS, ROW_FORMAT, native_rows
    from storage import analysis_sql, trace_sql
    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations
    from storage.reader import ClickHouseTraceReader, TraceQuery
    from storage.writer import OnceWriter

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    data_dir = Path(tempfile.mkdtemp(prefix="hotspan-dedup-"))
    ch = ClickHouse(f"chdb://{data_dir / 'clickhouse'}", f"dedup_{uuid.uuid4().hex[:8]}")
    apply_migrations(ch)
    started = time.perf_counter()
    spacing = args.window_s * 1_000_000_000 // max(1, args.spans // 20)
    ch.command(
        GENERATE.replace("COLUMNS", trace_sql.STORED_COLUMNS), {"base": BASE_NS, "spacing": spacing, "rows": args.spans}
    )
    ch.command(RECOPY.replace("STORED", trace_sql.STORED_COLUMNS).replace("ROWS", trace_sql.ROW_COLUMNS))
    ch.command("OPTIMIZE TABLE otel_traces FINAL")
    rows = int(ch.query_rows("SELECT count() FROM otel_traces")[0][0])
    print(
        f"store: {rows:,} rows ({args.spans:,} spans + 1 % later copies) built in {time.perf_counter() - started:.0f} s"
    )

    # (a) ingest
    groups = []
    for number in range(args.groups):
        bodies = build_requests(20_000, seed=1000 + number)
        groups.append(b"".join(native_rows(body, "default", DEFAULT_LIMITS)[1] for body in bodies))  # type: ignore[index]
    plain, checked, repeated = [], [], []
    once = OnceWriter(ch)
    for number, group in enumerate(groups):
        started = time.perf_counter()
        if number % 2:
            once.store(group, COLUMNS)
            checked.append(time.perf_counter() - started)
        else:
            ch.insert_raw("otel_traces", COLUMNS, group, ROW_FORMAT)
            plain.append(time.perf_counter() - started)
    for group in groups:
        started = time.perf_counter()
        outcome = once.store(group, COLUMNS)
        repeated.append(time.perf_counter() - started)
        assert outcome.stored == 0, outcome
    plain_rate = 20_000 / statistics.median(plain)
    checked_rate = 20_000 / statistics.median(checked)
    print(f"(a) plain Native insert (as before):       {plain_rate:>9,.0f} spans/s")
    print(f"    OnceWriter, new spans:                 {checked_rate:>9,.0f} spans/s")
    print(f"    OnceWriter, every span a repeat:       {20_000 / statistics.median(repeated):>9,.0f} spans/s")

    # (b) reads
    reader = ClickHouseTraceReader(ch)
    trace_ids = [
        row[0] for row in ch.query_rows("SELECT DISTINCT TraceId FROM otel_traces WHERE Version > 0 LIMIT 100")
    ]
    window = {"start": BASE_NS + DAY_NS // 2, "end": BASE_NS + DAY_NS // 2 + 3_600_000_000_000}
    quantile_args = (["gateway", "agent"], window["start"], window["end"], 0.95, 1)
    from storage.analysis_store import ClickHouseAnalysisStore

    store = ClickHouseAnalysisStore(ch, ())
    cases = [
        (
            "trace by ID",
            lambda: ch.query_arrow(OLD_TRACE, {"trace_id": trace_ids[0]}),
            lambda: reader.trace(trace_ids[0], tenant="default"),
        ),
        (
            "search, 20 traces",
            lambda: ch.query_rows(OLD_SEARCH),
            lambda: reader.search(TraceQuery(service="gateway", limit=20), tenant="default"),
        ),
        (
            "100 traces for the pipeline",
            lambda: ch.query_arrow(OLD_TRACES, {"trace_ids": trace_ids}),
            lambda: ch.query_arrow(
                analysis_sql.TRACES_SPANS, {"trace_ids": trace_ids, "tenant": "default", "all_tenants": False}
            ),
        ),
        (
            "hotspot quantile over 1 h",
            lambda: ch.query_rows(OLD_QUANTILES, window),
            lambda: store.duration_quantiles(*quantile_args, tenant="default"),
        ),
        (
            "dependencies over the day",
            lambda: ch.query_rows(OLD_DEPENDENCIES),
            lambda: reader.dependencies(BASE_NS, BASE_NS + DAY_NS, tenant="default"),
        ),
    ]
    print("(b) reads, median ms            without   latest copy")
    for name, old, new in cases:
        print(f"    {name:<28} {median_ms(old, args.repeats):>8.1f}   {median_ms(new, args.repeats):>8.1f}")

    # (c) bytes
    total, version = ch.query_rows(
        "SELECT sum(data_compressed_bytes), sumIf(data_compressed_bytes, name = 'Version')"
        " FROM system.columns WHERE database = currentDatabase() AND table = 'otel_traces'"
    )[0]
    print(
        f"(c) otel_traces compressed: {int(total) / 2**20:,.1f} MiB, of which Version {int(version) / 2**10:,.1f} KiB"
    )

    # (d) the alternative
    ch.command(RMT_TABLE)
    started = time.perf_counter()
    ch.command(f"INSERT INTO otel_traces_rmt SELECT {trace_sql.STORED_COLUMNS} FROM otel_traces")
    print(f"(d) rebuilding into ReplacingMergeTree: {time.perf_counter() - started:.1f} s for {rows:,} rows")
    print(f"    search with FINAL: {median_ms(lambda: ch.query_rows(RMT_SEARCH), args.repeats):.1f} ms")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ch.close()
    print(f"dedup_ingest_ratio: {checked_rate / plain_rate:.2f}")


if __name__ == "__main__":
    main()
