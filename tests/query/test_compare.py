"""Comparisons (``query.trace_compare``, ``query.window_compare``) on hand-built traces and request summaries."""

from __future__ import annotations

import polars as pl
import pytest
from span_frames import spans_frame

from analysis import STAGES
from analysis.stage_rules import load_stage_rules
from query.trace_compare import compare_traces
from query.trace_model import build_trace_view
from query.window_compare import compare_requests

RULES = load_stage_rules()


def test_two_traces_differ_by_path_and_stage() -> None:
    # B: the root and b took 100 longer, c is gone, d is new.
    a = build_trace_view("ab" * 16, spans_frame([("a", "", 0, 100), ("b", "a", 10, 50), ("c", "b", 20, 10)]), RULES)
    b_spans = spans_frame([("a", "", 0, 200), ("b", "a", 10, 150), ("d", "a", 170, 20)], trace_id="cd" * 16)
    b = build_trace_view("cd" * 16, b_spans, RULES)
    comparison = compare_traces(a, b)
    paths = {row["label"]: row for row in comparison.paths.iter_rows(named=True)}
    assert set(paths) == {"svc-a:op-a", "svc-b:op-b", "svc-a:op-c", "svc-a:op-d"}
    assert (paths["svc-a:op-a"]["duration_a_ns"], paths["svc-a:op-a"]["duration_b_ns"]) == (100, 200)
    assert paths["svc-b:op-b"]["delta_ns"] == 100 and paths["svc-b:op-b"]["depth"] == 1
    assert (paths["svc-a:op-c"]["count_a"], paths["svc-a:op-c"]["count_b"]) == (1, 0)
    assert (paths["svc-a:op-d"]["count_a"], paths["svc-a:op-d"]["count_b"]) == (0, 1)
    assert (comparison.only_a, comparison.only_b) == (1, 1)
    assert comparison.paths["delta_ns"].abs().to_list() == sorted(comparison.paths["delta_ns"].abs(), reverse=True)
    assert comparison.stages.to_dicts() == [{"stage": "other", "a_ns": 100, "b_ns": 200, "delta_ns": 100}]


def _requests(durations: list[int], decode: list[int], models: list[str]) -> pl.DataFrame:
    count = len(durations)
    stages = {f"{stage}_ns": [0] * count for stage in STAGES}
    stages["llm.decode_ns"] = decode
    stages["other_ns"] = [d - x for d, x in zip(durations, decode, strict=True)]
    return pl.DataFrame(
        {
            "trace_id": [f"{i:032x}" for i in range(count)],
            "duration_ns": durations,
            "error_count": [1 if d > 500 else 0 for d in durations],
            "llm_calls": [1] * count,
            "root_service": ["gw"] * count,
            "root_name": ["POST /chat"] * count,
            "model": models,
            "tenant": [None] * count,
        }
        | stages
    )


def test_slow_requests_against_the_baseline() -> None:
    # Ten requests; the two slowest decode 500 more and all ran model "big".
    durations = [100] * 8 + [900, 1000]
    requests = _requests(durations, [50] * 8 + [550, 600], ["small"] * 8 + ["big", "big"])
    result = compare_requests(requests, 0.8)
    assert result is not None
    assert (result.slow, result.baseline, result.threshold_ns) == (2, 8, 900)
    stages = {row["stage"]: row for row in result.stages.iter_rows(named=True)}
    assert stages["llm.decode"]["slow_mean_ns"] == 575 and stages["llm.decode"]["baseline_mean_ns"] == 50
    assert result.stages["stage"][0] == "llm.decode"  # the stage that grew most comes first
    top = result.attributes.row(0, named=True)
    assert top["attribute"] in ("model", "has_error") and top["delta"] == pytest.approx(1.0)
    model = result.attributes.filter((pl.col("attribute") == "model") & (pl.col("value") == "big")).row(0, named=True)
    assert (model["slow_share"], model["baseline_share"]) == (1.0, 0.0)
    assert compare_requests(requests.head(1), 0.9) is None
    assert compare_requests(_requests([5, 5, 5], [1, 1, 1], ["m"] * 3), 0.5) is None  # nothing faster than slow
