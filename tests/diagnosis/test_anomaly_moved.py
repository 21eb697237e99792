"""The detector diagnoses only where something moved: a tenant of eight root services, each an agent stack of its own
(:func:`anomaly_history.as_root`) serving steady minutes; in the judged minute one root service's engine queue
saturates (its latency series deviate) and another's tool calls answer uncompressed megabyte bodies timed as before
(no series moves: its requests' shape does). The evaluation diagnoses those two root services' windows and no
other, opens an incident on each, and a steady minute diagnoses nothing; on one node and on the two-shard cluster
(the screen's query joins spans to requests across shards). The counts are what the detector reports
of its own evaluation (:class:`incidents.lifecycle.Evaluation`); ``benchmarks/anomaly_fleet.py`` measures the same
at a thousand root services."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pytest
from anomaly_history import FAULT_MINUTE, SETTINGS, as_root, at_end_of, saturated, steady, uncompressed
from cluster_kit import layout_database
from diagnosis_support import otlp_request

from collector.ingest import Ingestor
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from incidents.lifecycle import AnomalyDetector
from processors.pipeline.config import TracePipelineConfig
from query.anomaly import shape_moved
from storage.incident_store import SHAPE_SCHEMA, ClickHouseIncidentStore
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import query_room

TENANT = "fleet"
ROOTS = 8
SATURATED = 3
PAYLOAD = 5


@pytest.fixture(scope="module")
def detector(chdb_dsn: str, layout: str) -> Iterator[AnomalyDetector]:
    rng = np.random.default_rng(34)
    with layout_database(chdb_dsn, layout) as ch:
        ingestor = Ingestor(ClickHouseTraceWriter(ch))
        for minute in range(FAULT_MINUTE + 1):
            spans = []
            for root in range(ROOTS):
                requests = steady(minute, rng)
                if minute == FAULT_MINUTE and root == SATURATED:
                    requests = saturated(minute)
                elif minute == FAULT_MINUTE and root == PAYLOAD:
                    requests = uncompressed(requests)
                spans += as_root(requests, root, root * 100_000)
            ingestor.export(otlp_request(spans), tenant=TENANT)
        storage = Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))
        open_trace_pipeline(storage, TracePipelineConfig(), trace_processors(storage)).run_once(force=True)
        room = query_room(ch)
        yield AnomalyDetector(ClickHouseIncidentStore(ch), room.store, room.store, room.diagnosis, SETTINGS)


def test_a_steady_minute_diagnoses_no_root_service(detector: AnomalyDetector) -> None:
    evaluation = detector.judge(at_end_of(FAULT_MINUTE - 1))
    assert evaluation.changes == []
    assert (evaluation.diagnosed, evaluation.diagnoses) == ({TENANT: []}, 0)


@pytest.mark.both_layouts
def test_only_the_root_services_that_moved_are_diagnosed(detector: AnomalyDetector) -> None:
    evaluation = detector.judge(at_end_of(FAULT_MINUTE))
    moved = [f"gateway-{SATURATED:03d}", f"gateway-{PAYLOAD:03d}"]
    assert evaluation.diagnosed == {TENANT: sorted(moved)}
    opened = {c.incident.service: c.incident for c in evaluation.changes if c.change == "opened"}
    assert len(opened) == 2 and len(evaluation.changes) == 2, [
        (c.change, c.incident.series) for c in evaluation.changes
    ]
    assert {s for incident in opened.values() for s in incident.services} <= {
        f"{service}-{root:03d}" for service in ("gateway", "agent", "retriever", "tools", "vllm") for root in (3, 5)
    }
    assert opened[f"gateway-{PAYLOAD:03d}"].name == "oversized_payload"
    # Per root service that moved: its window, the seasonal baseline window (empty here) and the trailing one its
    # warning is judged against, the span across the window's start that names the incident's causes.
    assert evaluation.diagnoses == 4 * len(moved)


def _shape(rows: list[tuple[str, str, bool, int, int, float]]) -> pl.DataFrame:
    """Shape rows of root service ``r``: (span service, name, current, spans, requests, largest body)."""
    return pl.DataFrame(
        [("r", *row) for row in rows],
        schema=list(SHAPE_SCHEMA),
        orient="row",
    ).cast(SHAPE_SCHEMA)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("now", "moved"),
    [
        pytest.param([("agent", "llm", True, 24, 24, 0.0)], False, id="the same shape"),
        pytest.param([("agent", "llm", True, 26, 24, 0.0)], False, id="a few more spans"),
        pytest.param([("agent", "llm", True, 48, 24, 0.0)], True, id="twice the calls per request"),
        pytest.param([("agent", "llm", True, 24, 24, 0.0), ("agent", "connect", True, 12, 24, 0.0)], True, id="new"),
        pytest.param([("agent", "llm", True, 24, 24, 1.8e6)], True, id="megabyte bodies"),
    ],
)
def test_a_shape_moves_when_spans_or_bodies_grow(
    now: list[tuple[str, str, bool, int, int, float]], moved: bool
) -> None:
    before = [("agent", "llm", False, 24, 24, 0.0)]
    assert shape_moved(_shape(before + now), min_requests=10) == ({"r"} if moved else set())


def test_a_root_service_without_requests_before_has_moved() -> None:
    assert shape_moved(_shape([("agent", "llm", True, 24, 24, 0.0)]), min_requests=10) == {"r"}
