"""The ingest pipeline in-process on the session's embedded ClickHouse: acknowledgement, spool,
outages, back-pressure, idempotent re-inserts.

Storage outages are caused at the storage client boundary (storage.faults.FaultInjectingClickHouse):
no ClickHouse server recent enough for clickhouse-connect can be installed here, and the embedded
engine cannot be stopped. The wrapper raises exactly what clickhouse-connect raises when a server is
unreachable (OperationalError) or refuses an insert (DatabaseError), for a chosen span of time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry

from collector.ingest_pipeline import IngestConfig, IngestPipeline, QueueFullError, StorageUnavailableError
from collector.metrics import IngestMetrics
from collector.otlp_body import PROTOBUF, check_body
from collector.results import ExportResult
from collector.spool import Spool
from storage.clickhouse import ClickHouse
from storage.faults import FaultInjectingClickHouse, FaultPlan
from storage.migrations import apply_migrations

BASE_NS = 1_700_000_000_000_000_000


def request(first_span: int, spans: int, trace: int = 1) -> ExportTraceServiceRequest:
    """``spans`` valid spans with span IDs ``first_span``, ``first_span + 1``, ..."""
    req = ExportTraceServiceRequest()
    resource_spans = req.resource_spans.add()
    kv = resource_spans.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "svc"
    scope_spans = resource_spans.scope_spans.add()
    for index in range(first_span, first_span + spans):
        span = scope_spans.spans.add()
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = (index + 1).to_bytes(8, "big")
        span.name = "op"
        span.start_time_unix_nano = BASE_NS + index
        span.end_time_unix_nano = BASE_NS + index + 1000
        attribute = span.attributes.add()
        attribute.key, attribute.value.int_value = "i", index
    return req


@pytest.fixture
def database(chdb_dsn: str) -> Iterator[ClickHouse]:
    ch = ClickHouse(chdb_dsn, f"p_{uuid.uuid4().hex[:12]}")
    apply_migrations(ch)
    yield ch
    ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
    ch.close()


def open_pipeline(
    database: ClickHouse, data_dir: Path, plan: FaultPlan | None = None, **config: object
) -> tuple[IngestPipeline, CollectorRegistry]:
    registry = CollectorRegistry()

    def open_handle() -> ClickHouse:
        ch = ClickHouse(database.dsn, database.database)
        return FaultInjectingClickHouse(ch, plan) if plan else ch

    settings = {"retry_after_s": 0.2, "retry_max_s": 0.5, **config}
    pipeline = IngestPipeline(open_handle, data_dir, IngestConfig(**settings), IngestMetrics(registry))  # type: ignore[arg-type]
    pipeline.start()
    return pipeline, registry


def send(pipeline: IngestPipeline, req: ExportTraceServiceRequest) -> Future[ExportResult]:
    checked = check_body(req.SerializeToString(), PROTOBUF)
    ticket = pipeline.admit("test", len(checked.body))
    pipeline.resize(ticket, len(checked.body), checked.spans)
    return pipeline.submit(ticket, checked.body, checked.result)


def stored(database: ClickHouse) -> tuple[int, int]:
    """(rows, distinct span IDs) in otel_traces."""
    rows, distinct = database.query_rows("SELECT count(), uniqExact(SpanId) FROM otel_traces")[0]
    return int(rows), int(distinct)


def test_a_lone_sender_reads_its_spans_right_after_the_answer(database: ClickHouse, tmp_path: Path) -> None:
    pipeline, registry = open_pipeline(database, tmp_path)
    try:
        for first in (0, 10, 20):
            assert send(pipeline, request(first, 10)).result(30).accepted == 10
            assert stored(database) == (first + 10, first + 10)
        assert registry.get_sample_value("hotspan_ingest_spans_accepted_total", {"protocol": "test"}) == 30
        assert registry.get_sample_value("hotspan_storage_insert_seconds_count") == 3
    finally:
        pipeline.stop()
    assert not any((tmp_path / "ingest" / "spool").glob("seg-*"))


def test_insert_failures_spool_acknowledged_spans_and_store_them_once_after_recovery(
    database: ClickHouse, tmp_path: Path
) -> None:
    # clickhouse-connect's DatabaseError for every INSERT INTO otel_traces during the first 2 s.
    pipeline, registry = open_pipeline(database, tmp_path, FaultPlan(insert_fail_for_s=2.0))
    try:
        acknowledged = sum(send(pipeline, request(i * 50, 50)).result(30).accepted for i in range(6))
        assert acknowledged == 300
        assert stored(database) == (0, 0)
        assert registry.get_sample_value("hotspan_storage_available") == 0
        assert registry.get_sample_value("hotspan_spool_spans") == 300
        assert pipeline.flush(30)
        assert stored(database) == (300, 300)
        assert registry.get_sample_value("hotspan_storage_insert_failures_total") >= 1
        assert registry.get_sample_value("hotspan_storage_insert_retries_total") >= 1
        assert registry.get_sample_value("hotspan_storage_available") == 1
        assert registry.get_sample_value("hotspan_spool_bytes") == 0
    finally:
        pipeline.stop()


def test_an_unreachable_server_is_ridden_out_from_the_spool(database: ClickHouse, tmp_path: Path) -> None:
    # clickhouse-connect's OperationalError (connection refused) on every call during the first 1.5 s.
    pipeline, _ = open_pipeline(database, tmp_path, FaultPlan(unreachable_for_s=1.5))
    try:
        futures = [send(pipeline, request(i * 20, 20)) for i in range(5)]
        assert sum(f.result(30).accepted for f in futures) == 100
        assert pipeline.flush(30)
        assert stored(database) == (100, 100)
    finally:
        pipeline.stop()


def test_spool_survives_a_restart_and_is_inserted_by_the_next_run(database: ClickHouse, tmp_path: Path) -> None:
    pipeline, _ = open_pipeline(database, tmp_path, FaultPlan(insert_fail_for_s=60))
    try:
        assert send(pipeline, request(0, 40)).result(30).accepted == 40
    finally:
        pipeline.stop()
    assert stored(database) == (0, 0)
    pipeline, _ = open_pipeline(database, tmp_path)
    try:
        assert pipeline.flush(30)
    finally:
        pipeline.stop()
    assert stored(database) == (40, 40)


class CrashAfterInsert(FaultPlan):
    """Stops the inserter right after an insert, before its segments are deleted (as a kill -9 would;
    SystemExit ends the thread quietly)."""

    def crash_now(self) -> None:
        raise SystemExit


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_group_inserted_again_after_a_crash_is_stored_once(database: ClickHouse, tmp_path: Path) -> None:
    """The crash window between an insert and the deletion of its segments: the recorded group is inserted again
    after the restart, and the writer finds every span of it stored (storage.writer.OnceWriter)."""
    pipeline, _ = open_pipeline(database, tmp_path, FaultPlan(insert_fail_for_s=60))
    try:
        for i in range(3):
            send(pipeline, request(i * 2000, 2000, trace=i + 1)).result(30)
    finally:
        pipeline.stop()
    # The failing inserter recorded the group it kept retrying; a restart gets the same one back.
    group = Spool(tmp_path / "ingest" / "spool", 1 << 30).next_group(4000)
    assert group is not None
    assert Spool(tmp_path / "ingest" / "spool", 1 << 30).next_group(1) == group

    crashing, _ = open_pipeline(database, tmp_path, CrashAfterInsert(crash_after_insert=True), insert_threads=1)
    deadline = time.monotonic() + 30
    while stored(database)[0] < group.spans and time.monotonic() < deadline:
        time.sleep(0.05)
    crashing.stop()
    assert stored(database) == (group.spans, group.spans)
    assert Spool(tmp_path / "ingest" / "spool", 1 << 30).spans == 6000, "nothing was deleted"

    pipeline, _ = open_pipeline(database, tmp_path)
    try:
        assert pipeline.flush(30)
    finally:
        pipeline.stop()
    assert stored(database) == (6000, 6000)


def test_back_pressure_limits_are_enforced_before_bodies_are_read(database: ClickHouse, tmp_path: Path) -> None:
    pipeline, registry = open_pipeline(
        database, tmp_path, FaultPlan(insert_fail_for_s=60), queue_max_spans=100, queue_max_bytes=1 << 20
    )
    try:
        send(pipeline, request(0, 100)).result(30)
        # Still healthy until the first insert fails: the backlog (100 spans spooled) is the limit.
        deadline = time.monotonic() + 10
        while registry.get_sample_value("hotspan_storage_available") != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        ticket = pipeline.admit("test", 10)
        pipeline.resize(ticket, 10, 1)  # storage down: the spool, not the backlog limit, bounds intake
        pipeline.release(ticket)
    finally:
        pipeline.stop()
    pipeline, _ = open_pipeline(database, tmp_path, queue_max_spans=100, queue_max_bytes=1 << 20)
    try:
        blocked = pipeline.admit("test", 10)
        with pytest.raises(QueueFullError):
            pipeline.resize(blocked, 10, 200)
        big = pipeline.admit("test", 1 << 20)
        with pytest.raises(QueueFullError):
            pipeline.admit("test", 10)
        pipeline.release(big)
    finally:
        pipeline.stop()


def test_a_full_spool_while_storage_fails_sheds_with_503(database: ClickHouse, tmp_path: Path) -> None:
    pipeline, registry = open_pipeline(database, tmp_path, FaultPlan(unreachable_for_s=60), spool_max_bytes=4096)
    try:
        send(pipeline, request(0, 30)).result(30)
        with pytest.raises(StorageUnavailableError):
            for i in range(1, 20):
                send(pipeline, request(i * 30, 30)).result(30)
        assert registry.get_sample_value("hotspan_spool_full") == 1
    finally:
        pipeline.stop()


def test_fault_plan_parses_the_test_hook_spec() -> None:
    plan = FaultPlan.parse("insert_fail_for_s=5, start_after_s=1.5,crash_after_insert=1")
    assert plan == FaultPlan(insert_fail_for_s=5, start_after_s=1.5, crash_after_insert=True)
    with pytest.raises(ValueError, match="unknown fault injection key"):
        FaultPlan.parse("explode=1")


def test_fault_wrapper_raises_what_clickhouse_connect_raises(database: ClickHouse) -> None:
    faulty = FaultInjectingClickHouse(database, FaultPlan(insert_fail_for_s=30))
    assert faulty.query_rows("SELECT 1") == [(1,)]
    with pytest.raises(DatabaseError, match="TOO_MANY_PARTS"):
        faulty.command("INSERT INTO otel_traces (TraceId) VALUES ('x')")
