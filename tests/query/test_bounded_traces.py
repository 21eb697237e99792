"""Many traces read by ID at once (Jaeger's ``/api/traces?traceID=...``, Jaeger UI's trace comparison): the same
bounded pages as one read per ID, in a few reads whatever their number. One read per ID took 13 s for the 141
traces of otel-tui's capture on chDB (0.1 s each), past a 30 s client timeout on a loaded host."""

from __future__ import annotations

from collector.ingest import Ingestor
from query.bounded_trace import read_bounded_trace, read_bounded_traces
from storage.clickhouse import ClickHouse
from storage.tenancy import ALL_TENANTS
from testkit import TRACES, CountingTraceReader, ingest_otlp_json_file

CAPTURE = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"


def test_many_ids_read_as_one_read_each_would(store: ClickHouse, ingestor: Ingestor) -> None:
    assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, CAPTURE))
    reader = CountingTraceReader(store)
    sizes = reader.trace_sizes(["0" * 31 + "1"], tenant=ALL_TENANTS)
    assert sizes == {}
    ids = sorted(row[0] for row in store.query_rows("SELECT DISTINCT TraceId FROM otel_traces"))
    assert len(ids) == 141
    sizes = reader.trace_sizes(ids, tenant=ALL_TENANTS)
    everything = read_bounded_traces(reader, [*ids, "f" * 32], tenant=ALL_TENANTS, limit=10_000)
    assert set(everything) == set(ids) and reader.span_reads == 1
    # Pages smaller than the two largest traces: those are paged alone, the rest read in groups of at most a page.
    limit = sorted(sizes.values())[-2] - 1
    reader.span_reads = 0
    found = read_bounded_traces(reader, ids, tenant=ALL_TENANTS, limit=limit)
    paged = [trace_id for trace_id, size in sizes.items() if size > limit]
    assert len(paged) >= 2 and reader.span_reads <= 2 * sum(sizes.values()) // limit + 1 + len(paged)
    # One read per ID is the slow path this replaced (0.1 s each): compared on the paged traces and every 10th.
    for trace_id in {*paged, *ids[::10]}:
        one = read_bounded_trace(reader, trace_id, tenant=ALL_TENANTS, limit=limit)
        many = found[trace_id]
        assert (many.span_count, many.partial, many.next) == (one.span_count, one.partial, one.next), trace_id
        assert many.spans.equals(one.spans), trace_id
        assert everything[trace_id].spans.height == sizes[trace_id]
