"""Accepted implies readable, at the edges of the validator's time rules (issue 28): spans drawn around every bound
of :func:`collector.batch.check_span` (0, 1, the store's last instant 2^63-1 and past it, 2^64-1) go through the
receiver's check, both converters (the compiled scanner and the Python reference) and the real writer into chDB;
every span the check accepts is read back with the start and duration it was sent with (0 for a span sent without
an end), and every span it refuses is absent. Both converters must agree with the check: the scanner may hand a
request to Python, never store what the check refused.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from otlp_random import request, span

from analysis.decomposition import stage_breakdown
from collector.batch import MAX_TIME_NS, check_request
from collector.batchwriter import python_request
from collector.limits import SpanLimits
from collector.native_writer import native_check
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import DEFAULT_TENANT
from storage.writer import OnceWriter

EDGES = [0, 1, 2, 1_700_000_000_000_000_000, MAX_TIME_NS - 1, MAX_TIME_NS, MAX_TIME_NS + 1, 2**64 - 1]
TRACE = "5b8efff798038103d269b633813fc60c"
"""The trace of :func:`otlp_random.span`."""
times = st.one_of(st.sampled_from(EDGES), st.integers(0, 2**64 - 1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(times, times, times), min_size=1, max_size=6))
def test_accepted_spans_read_back_exactly_and_analyse(store: ClickHouse, pairs: list) -> None:
    spans = [
        span(index + 1, start_time_unix_nano=start, end_time_unix_nano=end, events=[{"time_unix_nano": event}])
        for index, (start, end, event) in enumerate(pairs)
    ]
    sent = request(*spans)
    body = sent.SerializeToString()
    verdict = check_request(sent)
    accepted = {f"{p[2] + 1:016x}" for p in verdict.kept}
    scanned = native_check(body)
    assert scanned == len(spans) if not (verdict.rejections or verdict.warnings) else isinstance(scanned, str)
    result, table, _ = python_request(body, DEFAULT_TENANT, [], SpanLimits())
    assert not isinstance(result, Exception) and result.accepted == len(accepted)
    store.command("TRUNCATE TABLE otel_traces")
    if table is not None:
        OnceWriter(store).store(tables=[table])
    rows = store.query_rows("SELECT SpanId, toUnixTimestamp64Nano(Timestamp), Duration FROM otel_traces")
    expected = {
        f"{index + 1:016x}": (start, end - start if end else 0)
        for index, (start, end, _) in enumerate(pairs)
        if f"{index + 1:016x}" in accepted
    }
    assert {span_id: (start, duration) for span_id, start, duration in rows} == expected
    if expected:
        # The pipeline's read and analysis of what was stored: every span's window as sent, stage totals in range.
        frame = ClickHouseTraceReader(store).trace(TRACE, tenant=None)
        breakdown = stage_breakdown(frame)
        envelope = max(start + length for start, length in expected.values()) - min(s for s, _ in expected.values())
        assert breakdown.is_empty() or breakdown["duration_ns"].min() >= 0
        assert 0 <= breakdown["duration_ns"].sum() <= envelope
