"""Capacity health score over engine metrics served by the Prometheus stand-in (plain selectors, as vLLM names
them): per engine and per service, with its parts and inputs."""

from __future__ import annotations

import math

import pytest
from capacity_support import WINDOW_S, T, add_llama_pair
from prometheus_standin import PrometheusStandIn

from diagnosis import PrometheusMetricsSource
from diagnosis.capacity import CapacityScore, CapacitySettings, capacity_scores, fuse

SETTINGS = CapacitySettings(ttft_slo_s=2.0, kv_saturation=0.95, max_rate_per_s=2.0, window_s=WINDOW_S)


def _scores() -> dict[tuple[str, str], CapacityScore]:
    with PrometheusStandIn() as standin:
        add_llama_pair(standin)
        source = PrometheusMetricsSource(standin.url)
        scores = capacity_scores(source, int((T + WINDOW_S) * 1e9), SETTINGS)
    return {(score.scope, score.name): score for score in scores}


def test_engines_and_their_service_are_scored_from_their_parts() -> None:
    scores = _scores()
    assert list(scores) == [("engine", "a:8000/llama"), ("engine", "b:8000/llama"), ("service", "vllm-llama")]
    healthy = scores["engine", "a:8000/llama"]
    assert healthy.inputs.kv_cache_usage == pytest.approx(0.2)
    assert healthy.inputs.request_rate_per_s == pytest.approx(1.0)
    # p95 of 60: rank 57 in (0.25, 0.5], 27 of the bucket's 30 above 0.25 s.
    assert healthy.inputs.ttft_p95_seconds == pytest.approx(0.25 + 0.25 * 27 / 30)
    expected = {"kv_cache": 1 - 0.2 / 0.95, "queue": 1.0, "ttft": 1 - 0.475 / 2, "rate": 0.5}
    assert healthy.parts == pytest.approx(expected)
    assert healthy.score == pytest.approx(100 * math.prod(expected.values()) ** 0.25, abs=0.05)

    busy = scores["engine", "b:8000/llama"]
    assert busy.parts["queue"] == pytest.approx(0.5) and busy.parts["ttft"] == 0.0  # p95 2.425 s, over the SLO
    assert busy.score is not None and busy.score < 30 < healthy.score

    service = scores["service", "vllm-llama"]
    # The fullest engine's cache, the summed queues and rates, and the pooled histogram (p95 at rank 85.5 of 90).
    assert service.inputs.kv_cache_usage == pytest.approx(0.6)
    assert service.parts["queue"] == pytest.approx(1 - 2 / 8)
    assert service.inputs.request_rate_per_s == pytest.approx(1.5)
    assert service.inputs.ttft_p95_seconds == pytest.approx(1.0 + 1.5 * (85.5 - 60) / 30)


def test_fusion_is_a_weighted_geometric_mean_floored_per_part() -> None:
    assert fuse({}, {}) is None
    assert fuse({"kv_cache": 0.5, "queue": 0.5}, {}) == 50.0
    # One exhausted part of four equal weights caps the score (0.01 ** 0.25 = 0.316).
    assert fuse({"kv_cache": 0.0, "queue": 1.0, "ttft": 1.0, "rate": 1.0}, {}) == 31.6
    assert fuse({"kv_cache": 0.25, "queue": 1.0}, {"kv_cache": 3.0, "queue": 1.0}) == pytest.approx(35.4, abs=0.05)
