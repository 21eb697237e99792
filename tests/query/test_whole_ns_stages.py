"""The stage views in whole nanoseconds: REST times are integers (README), and a request's stages sum to its
duration exactly. The wall-clock view splits instants among concurrent spans, so its shares are fractions; they are
rounded by the largest remainder method. Before, ``/stages`` answered floats (``"other": 1696000.0000000014`` on
Jaeger UI's statistics fixture, found by a fresh user's sweep), which a Go client reading ``int64`` refuses and
whose sum never equalled ``total_ns``."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import STAGES
from analysis.trace_analysis import analyze
from collector.formats import Payload, read_payloads
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from query.analysis_service import trace_stages_of, whole_ns
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS

FIXTURE = Path(__file__).parents[1] / "analysis" / "fixtures" / "jaegerui__stats_spansAmongEachOther.json"


def test_a_real_trace_with_concurrent_spans_gets_whole_ns_summing_to_its_duration(
    ingestor: Ingestor, reader: ClickHouseTraceReader
) -> None:
    (payload,) = read_payloads(FIXTURE)
    assert isinstance(payload, Payload)
    assert ingestor.export(*request_from_json(payload.body)).rejected == 0
    spans = reader.trace("0df84e36b9e2ee3815d07f0867a5be1f", tenant=ALL_TENANTS)
    stages = trace_stages_of(analyze(spans))
    wall = stages.wall_clock_stages_ns
    assert all(type(ns) is int for ns in wall.values()) and list(wall) == list(STAGES)
    assert sum(wall.values()) == stages.total_ns == 3_720_000
    assert sum(stages.stages_ns.values()) == stages.total_ns


@pytest.mark.parametrize(
    ("shares", "total", "expected"),
    [
        ([1 / 3, 1 / 3, 1 / 3], 1, [1, 0, 0]),
        ([1696000.0000000014, 2024000.0], 3_720_000, [1_696_000, 2_024_000]),
        ([0.5, 1.5, 2.0], 4, [1, 1, 2]),
        ([2.6, 3.7, 0.7], 7, [2, 4, 1]),
    ],
)
def test_largest_remainders_get_the_ns_left_over(shares: list[float], total: int, expected: list[int]) -> None:
    padded = shares + [0.0] * (len(STAGES) - len(shares))
    assert list(whole_ns(padded, total).values())[: len(expected)] == expected


def test_stages_without_time_stay_zero_past_2_to_53_ns() -> None:
    # Two orphans 6.3 years apart (a fresh user's sweep): the window is 1.98e17 ns, where a float share's ulp is 32 ns.
    # Flooring left ns over, and the largest remainders went to stages without time (1 ns each).
    total = 198_410_805_196_325_000
    shares = [0.0] * len(STAGES)
    shares[STAGES.index("other")] = float(total)
    wall = whole_ns(shares, total)
    assert wall["other"] == total and sum(wall.values()) == total
    assert {stage for stage, ns in wall.items() if ns} == {"other"}
