"""The dependency rollup answers ``/api/dependencies`` as the raw spans do, at every moment (issue 34: 1 h of
dependencies at 100M spans took 3.0 s from the raw spans; Jaeger UI asks for 24 h).

Real captures (every Jaeger, Zipkin and OTLP file of ``../shared/data/traces``) go through ``hotspan import``'s path
into a scratch store, then into the store under test moved into the last hour (the rollup covers a horizon of recent
days; the captures are years old), each file starting in a minute of its own. Every answer is compared with
:func:`storage.dependency_rollup.raw_calls`, the raw query over the same window; windows cut minutes in two, and the
traces are broken the way the wild breaks them: a parent that arrives after its children were counted, a trace
deleted by tail sampling, a refresh that could not take every stale minute.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest

from hotspan.importer import StoreSink, import_paths
from storage import dependency_rollup
from storage.analysis_store import ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.dependency_rollup import DependencyRollup, raw_calls, rolled_minutes
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, migrated_database, serve_in_process
from units import NS_PER_MS, NS_PER_S

MINUTE_NS = 60 * NS_PER_S
HORIZON_S = 3 * 3600
"""The rollups' horizon here: a first refresh covers every minute of it, 60 a refresh."""
TENANCIES = ("default", ALL_TENANTS)
CAPTURES = sorted(path for folder in ("jaeger", "zipkin", "otlp") for path in (TRACES / folder).glob("*.json*"))


@pytest.fixture(scope="module")
def scratch(chdb_dsn: str) -> Iterator[ClickHouse]:
    """A one-node store the captures are imported into before they are moved in time."""
    with migrated_database(chdb_dsn, "deps_scratch") as ch:
        yield ch


def _now_minute_ns(store: ClickHouse) -> int:
    return int(store.query_rows("SELECT toUnixTimestamp64Nano(now64(9))")[0][0]) // MINUTE_NS * MINUTE_NS


def _import_moved(store: ClickHouse, scratch: ClickHouse, path: Path, first_ns: int) -> None:
    """Import ``path`` (``hotspan import``'s path) and store the spans it accepts in ``store``, moved so that the
    file's first span starts at ``first_ns`` (a few fixtures hold spans no store takes, such as the trace ID
    ``trace-123``: those are left out, as ``hotspan import`` leaves them)."""
    scratch.command("TRUNCATE TABLE otel_traces")
    if import_paths([path], StoreSink(ClickHouseTraceWriter(scratch)), progress=False).spans:
        _copy_moved(store, scratch, first_ns)


def _copy_moved(store: ClickHouse, scratch: ClickHouse, first_ns: int, where: str = "1") -> None:
    """Store the scratch store's spans matching ``where`` in ``store``, moved as :func:`_import_moved` says."""
    first = int(scratch.query_rows("SELECT toUnixTimestamp64Nano(min(Timestamp)) FROM otel_traces")[0][0])
    store.command(
        f"""INSERT INTO {store.database}.otel_traces
        SELECT * REPLACE (Timestamp + toIntervalNanosecond({{shift:Int64}}) AS Timestamp)
        FROM {scratch.database}.otel_traces WHERE {where}""",
        {"shift": first_ns - first},
    )


def _refresh_all(rollup: DependencyRollup) -> None:
    """Refresh until nothing is left to recompute."""
    while rollup.refresh().left:
        pass


def _windows(base_ns: int) -> list[tuple[int, int]]:
    """Windows over the captures' hour: whole, cut inside minutes at both ends, one minute, inside one minute."""
    return [
        (base_ns - MINUTE_NS, base_ns + 60 * MINUTE_NS),
        (base_ns + 17 * NS_PER_S + 300 * NS_PER_MS, base_ns + 43 * MINUTE_NS + 12_500 * NS_PER_MS),
        (base_ns + 5 * MINUTE_NS, base_ns + 6 * MINUTE_NS - 1),
        (base_ns + 7 * MINUTE_NS + 10 * NS_PER_S, base_ns + 7 * MINUTE_NS + 50 * NS_PER_S),
    ]


def _assert_raw_answer(store: ClickHouse, base_ns: int) -> None:
    for start_ns, end_ns in _windows(base_ns):
        for tenant in TENANCIES:
            expected = raw_calls(store, start_ns, end_ns, tenant=tenant)
            assert dependency_rollup.dependencies(store, start_ns, end_ns, tenant=tenant) == expected, (
                start_ns,
                end_ns,
            )


@pytest.mark.both_layouts
def test_real_captures_read_from_the_rollup_as_from_the_raw_spans(store: ClickHouse, scratch: ClickHouse) -> None:
    base_ns = _now_minute_ns(store) - 70 * MINUTE_NS
    for index, path in enumerate(CAPTURES):
        _import_moved(store, scratch, path, base_ns + index * 37 * NS_PER_S + 500 * NS_PER_MS)
    rollup = DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S)
    assert dependency_rollup.dependencies(store, base_ns, base_ns + 60 * MINUTE_NS, tenant="default") == raw_calls(
        store, base_ns, base_ns + 60 * MINUTE_NS, tenant="default"
    )

    _refresh_all(rollup)

    whole = raw_calls(store, base_ns - MINUTE_NS, base_ns + 60 * MINUTE_NS, tenant="default")
    assert sum(count for _, _, count in whole) >= 20 and len({edge[:2] for edge in whole}) >= 10, whole
    assert len(rolled_minutes(store, base_ns - MINUTE_NS, base_ns + 60 * MINUTE_NS)) == 61
    _assert_raw_answer(store, base_ns)


def _jaegers_rule(store: ClickHouse, start_ns: int, end_ns: int, tenant: str) -> list[tuple[str, str, int]]:
    """The dependencies computed apart from the store's query, over every stored row: each span once (its copy with
    the highest ``Version``); a child starts in ``[start_ns, end_ns]`` and names a parent, a span of its tenant and
    trace; a call counts once per distinct service of its parent span ID that differs from the child's."""
    rows = store.query_rows(
        """SELECT if(Tenant = '', 'default', Tenant), TraceId, SpanId, ParentSpanId, ServiceName, SpanKind, SpanName,
            toUnixTimestamp64Nano(Timestamp), Version FROM otel_traces"""
    )
    columns = ["tenant", "trace", "span", "parent", "service", "kind", "name", "start", "version"]
    spans = pl.DataFrame(rows, schema=columns, orient="row")
    if tenant != ALL_TENANTS:
        spans = spans.filter(pl.col("tenant") == tenant)
    spans = spans.sort("version", descending=True).unique(
        ["tenant", "trace", "span", "kind", "name", "start"], keep="first"
    )
    children = spans.filter(pl.col("start").is_between(start_ns, end_ns) & (pl.col("parent") != ""))
    parents = spans.select("tenant", "trace", "span", pl.col("service").alias("caller")).unique()
    calls = (
        children.join(parents, left_on=["tenant", "trace", "parent"], right_on=["tenant", "trace", "span"])
        .filter(pl.col("caller") != pl.col("service"))
        .group_by("caller", "service")
        .len()
    )
    return sorted((caller, service, count) for caller, service, count in calls.iter_rows())


@pytest.mark.both_layouts
def test_the_raw_answer_is_jaegers_rule_over_rootless_and_resent_captures(
    store: ClickHouse, scratch: ClickHouse
) -> None:
    """Every capture, with the root span of about half its traces dropped and a third of its spans sent again later
    under another service name (a re-export after a rename: the latest copy counts, as a child and as a parent),
    answers as :func:`_jaegers_rule` computes from the stored rows, over windows cut inside minutes, for one tenant
    and all; the rollup answers the same after a refresh."""
    base_ns = _now_minute_ns(store) - 70 * MINUTE_NS
    for index, path in enumerate(CAPTURES):
        scratch.command("TRUNCATE TABLE otel_traces")
        if import_paths([path], StoreSink(ClickHouseTraceWriter(scratch)), progress=False).spans:
            rootless = "NOT (ParentSpanId = '' AND cityHash64(TraceId) % 2 = 0)"
            _copy_moved(store, scratch, base_ns + index * 37 * NS_PER_S + 500 * NS_PER_MS, where=rootless)
    store.command(
        f"""INSERT INTO {store.database}.otel_traces
        SELECT * REPLACE (Version + 1 AS Version, concat(ServiceName, '-renamed') AS ServiceName)
        FROM {store.database}.otel_traces WHERE cityHash64(SpanId) % 3 = 0"""
    )
    windows = _windows(base_ns)
    expected = {(window, tenant): _jaegers_rule(store, *window, tenant) for window in windows for tenant in TENANCIES}
    whole = expected[(windows[0], "default")]
    assert sum(count for _, _, count in whole) >= 20 and any(child.endswith("-renamed") for _, child, _ in whole)

    for (window, tenant), calls in expected.items():
        assert raw_calls(store, *window, tenant=tenant) == calls, (window, tenant)
    _refresh_all(DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S))
    for (window, tenant), calls in expected.items():
        assert dependency_rollup.dependencies(store, *window, tenant=tenant) == calls, (window, tenant)


def test_a_parent_arriving_after_its_children_were_counted_is_counted_at_once(
    store: ClickHouse, scratch: ClickHouse
) -> None:
    """otel-tui's capture (101 traces calling across services) without the spans of the service that calls others
    most, as when one service's exporter is minutes late; refreshed; then that service's spans. The calls it makes
    count from the moment they are stored (their traces' minutes are stale), and after the next refresh the rollup
    holds them again."""
    base_ns = _now_minute_ns(store) - 30 * MINUTE_NS
    window = (base_ns - MINUTE_NS, base_ns + 20 * MINUTE_NS)
    scratch.command("TRUNCATE TABLE otel_traces")
    capture = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
    assert import_paths([capture], StoreSink(ClickHouseTraceWriter(scratch)), progress=False).rejected == 0
    callers = scratch.query_rows(
        """SELECT p.ServiceName, count() AS calls FROM otel_traces AS p INNER JOIN otel_traces AS c
        ON c.TraceId = p.TraceId AND c.ParentSpanId = p.SpanId WHERE c.ServiceName != p.ServiceName
        GROUP BY p.ServiceName ORDER BY calls DESC, p.ServiceName LIMIT 1"""
    )
    late = callers[0][0]
    _copy_moved(store, scratch, base_ns + 59 * NS_PER_S, where=f"ServiceName != '{late}'")
    rollup = DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S)
    _refresh_all(rollup)
    before = dependency_rollup.dependencies(store, *window, tenant="default")

    _copy_moved(store, scratch, base_ns + 59 * NS_PER_S, where=f"ServiceName = '{late}'")

    after = dependency_rollup.dependencies(store, *window, tenant="default")
    assert after == raw_calls(store, *window, tenant="default") != before
    rollup.refresh()
    assert len(rolled_minutes(store, *window)) == 21
    _assert_raw_answer(store, base_ns)


def test_a_dropped_trace_leaves_the_answer_at_once(store: ClickHouse, scratch: ClickHouse) -> None:
    """Tail sampling deletes a trace's spans: the minutes it counted in are read raw until recomputed."""
    base_ns = _now_minute_ns(store) - 20 * MINUTE_NS
    window = (base_ns - MINUTE_NS, base_ns + 10 * MINUTE_NS)
    _import_moved(store, scratch, TRACES / "zipkin" / "zipkin__netflix.json", base_ns + 30 * NS_PER_S)
    rollup = DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S)
    _refresh_all(rollup)
    assert dependency_rollup.dependencies(store, *window, tenant="default"), "the capture calls other services"
    trace_ids = [row[0] for row in store.query_rows("SELECT DISTINCT TraceId FROM otel_traces")]

    ClickHouseAnalysisStore(store, ()).drop_traces("default", trace_ids, *window)

    assert (
        dependency_rollup.dependencies(store, *window, tenant="default")
        == []
        == raw_calls(store, *window, tenant="default")
    )
    rollup.refresh()
    assert dependency_rollup.dependencies(store, *window, tenant="default") == []
    assert len(rolled_minutes(store, *window)) == 11


def test_stale_minutes_beyond_one_refresh_are_read_raw_until_taken(store: ClickHouse, scratch: ClickHouse) -> None:
    """A refresh that may recompute 3 minutes finds more stale (eight captures five minutes apart): it marks the rest
    uncovered, and later refreshes take them, newest first; the answer is the raw one throughout."""
    base_ns = _now_minute_ns(store) - 45 * MINUTE_NS
    rollup = DependencyRollup(store, margin_s=0, max_minutes=3, horizon_s=3600)
    _refresh_all(rollup)
    for index, path in enumerate(CAPTURES[:8]):
        _import_moved(store, scratch, path, base_ns + index * 5 * MINUTE_NS + 7 * NS_PER_S)

    first = rollup.refresh()

    assert first.recomputed == 3 and first.left >= 5
    _assert_raw_answer(store, base_ns)
    while rollup.refresh().left:
        _assert_raw_answer(store, base_ns)
    assert len(rolled_minutes(store, base_ns, base_ns + 40 * MINUTE_NS - 1)) == 40


def test_outside_the_horizon_every_read_is_raw(store: ClickHouse, scratch: ClickHouse) -> None:
    """Spans older than the horizon (here a capture at its own 2019 time, and spans from 1970) are never rolled up."""
    summary = import_paths([TRACES / "zipkin" / "zipkin__yelp.json"], StoreSink(ClickHouseTraceWriter(store)))
    assert summary.rejected == 0
    rollup = DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S)
    _refresh_all(rollup)
    first, last = (
        int(value)
        for value in store.query_rows(
            "SELECT toUnixTimestamp64Nano(min(Timestamp)), toUnixTimestamp64Nano(max(Timestamp)) FROM otel_traces"
        )[0]
    )

    assert rolled_minutes(store, first - MINUTE_NS, last + MINUTE_NS) == []
    assert (
        dependency_rollup.dependencies(store, 0, last + MINUTE_NS, tenant="default")
        == raw_calls(store, 0, last + MINUTE_NS, tenant="default")
        != []
    )


def test_a_backfilled_day_older_than_the_horizon_stays_fresh(store: ClickHouse, scratch: ClickHouse) -> None:
    """A backfill covers minutes the refreshes would not (zipkin yelp's 2019 trace); spans of that trace arriving
    later make them stale at once, and refreshes recompute them although they lie outside their horizon (after the
    horizon's newer minutes: newest first)."""
    scratch.command("TRUNCATE TABLE otel_traces")
    capture = TRACES / "zipkin" / "zipkin__yelp.json"
    assert import_paths([capture], StoreSink(ClickHouseTraceWriter(scratch)), progress=False).rejected == 0
    (caller,) = scratch.query_rows(
        """SELECT p.ServiceName FROM otel_traces AS p INNER JOIN otel_traces AS c
        ON c.TraceId = p.TraceId AND c.ParentSpanId = p.SpanId WHERE c.ServiceName != p.ServiceName
        ORDER BY p.ServiceName LIMIT 1"""
    )[0]
    first = int(scratch.query_rows("SELECT toUnixTimestamp64Nano(min(Timestamp)) FROM otel_traces")[0][0])
    _copy_moved(store, scratch, first, where=f"ServiceName != '{caller}'")
    window = (first - 20 * MINUTE_NS, first + 20 * MINUTE_NS)
    rollup = DependencyRollup(store, margin_s=0, horizon_s=HORIZON_S)
    rollup.refresh()
    assert rollup.backfill(*window) == 41
    before = dependency_rollup.dependencies(store, *window, tenant="default")
    assert len(rolled_minutes(store, *window)) >= 39

    _copy_moved(store, scratch, first, where=f"ServiceName = '{caller}'")

    assert (
        dependency_rollup.dependencies(store, *window, tenant="default")
        == raw_calls(store, *window, tenant="default")
        != before
    )
    _refresh_all(rollup)
    assert len(rolled_minutes(store, *window)) >= 39
    assert dependency_rollup.dependencies(store, *window, tenant="default") == raw_calls(
        store, *window, tenant="default"
    )


def test_served_dependencies_read_the_rollup_the_pipeline_keeps(chdb_dsn: str, tmp_path: Path) -> None:
    """Production's path: OTLP/HTTP into a served Hotspan whose trace pipeline refreshes after every poll; the Jaeger
    route answers what the raw spans say, before and after the refresh covers the spans' minutes."""
    server = serve_in_process(
        chdb_dsn, tmp_path, "deps", trace_idle_s=0.2, dependency_refresh_s=0, visibility_margin_s=0
    )
    try:
        store = server.storage.clickhouse
        base_ns = _now_minute_ns(store) - 10 * MINUTE_NS
        spans = [
            _span(1, 1, 0, base_ns + 50 * NS_PER_S, "gateway"),
            _span(1, 2, 1, base_ns + 70 * NS_PER_S, "planner"),
            _span(1, 3, 2, base_ns + 130 * NS_PER_S, "model"),
        ]
        for service in ("gateway", "planner", "model"):
            resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
            mine = [span for span, owner in spans if owner == service]
            body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": mine}]}]}
            assert httpx.post(f"{server.base_url}/v1/traces", json=body).status_code == 200
        assert server.pipeline is not None and server.pipeline.flush(60)
        window = {"endTs": (base_ns + 9 * MINUTE_NS) // NS_PER_MS, "lookback": 10 * 60_000}
        expected = [
            {"parent": "gateway", "child": "planner", "callCount": 1},
            {"parent": "planner", "child": "model", "callCount": 1},
        ]

        deadline = time.monotonic() + 60
        while not rolled_minutes(store, base_ns, base_ns + 3 * MINUTE_NS - 1) and time.monotonic() < deadline:
            assert _served(server, window) == expected
            time.sleep(0.2)

        assert len(rolled_minutes(store, base_ns, base_ns + 3 * MINUTE_NS - 1)) == 3
        assert _served(server, window) == expected
    finally:
        server.stop()


def _span(trace: int, span: int, parent: int, start_ns: int, service: str) -> tuple[dict[str, object], str]:
    """One OTLP-JSON span of 10 ms of ``service`` (``parent`` 0 for a root), with its service."""
    return (
        {
            "traceId": f"{trace:032x}",
            "spanId": f"{span:016x}",
            "parentSpanId": f"{parent:016x}" if parent else "",
            "name": f"op {span}",
            "kind": 2,
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(start_ns + 10 * NS_PER_MS),
        },
        service,
    )


def _served(server: object, window: dict[str, int]) -> list[dict[str, object]]:
    answer = httpx.get(f"{server.base_url}/api/dependencies", params=window)  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    return sorted(answer.json()["data"], key=lambda edge: (edge["parent"], edge["child"]))
