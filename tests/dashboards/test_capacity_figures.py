"""The Services page's capacity panel builder: bands at the alert rules' lines, the limiting part in words with its
unit, a row per service above its engines, and one line (no empty table) when there is nothing to score."""

from __future__ import annotations

from dash import html
from dash_support import texts, walk

from dashboards.capacity_figures import band, capacity_panel, limit_text
from diagnosis.capacity import CapacityInputs, CapacityScore, CapacitySettings
from query.capacity import NOT_CONFIGURED, CapacityReport

SETTINGS = CapacitySettings(ttft_slo_s=2.0, max_rate_per_s=4.0)
BUSY = CapacityInputs(
    kv_cache_usage=0.5, requests_waiting=6.0, requests_running=4.0, request_rate_per_s=1.25, ttft_p95_seconds=2.4
)


def _score(scope: str, name: str, score: float | None, parts: dict[str, float]) -> CapacityScore:
    return CapacityScore(scope, name, "vllm", score, parts, BUSY)


def test_bands_follow_the_alert_lines() -> None:
    assert [band(value)[0] for value in (None, 0.0, 24.9, 25.0, 39.9, 40.0, 69.9, 70.0, 100.0)] == [
        "unknown", "exhausted", "exhausted", "low", "low", "tight", "tight", "healthy", "healthy",
    ]  # fmt: skip


def test_the_limit_is_the_weakest_part_in_words() -> None:
    assert limit_text(_score("engine", "e", 40.0, {"kv_cache": 0.47, "queue": 0.0, "ttft": 0.0}), SETTINGS) == (
        "Queue 6.0 waiting, 4.0 running"  # a tie goes to the part shown first
    )
    assert limit_text(_score("engine", "e", 40.0, {"ttft": 0.0, "rate": 0.69}), SETTINGS) == (
        "TTFT p95 2.40 s (SLO 2.00 s)"
    )
    assert limit_text(_score("engine", "e", 90.0, {"rate": 0.69}), SETTINGS) == "Rate 1.25 req/s of 4.00 req/s"
    assert limit_text(_score("engine", "e", None, {}), SETTINGS) == "no data"


def test_the_table_lists_each_service_above_its_engines() -> None:
    parts = {"kv_cache": 0.47, "queue": 0.0, "ttft": 0.0, "rate": 0.69}
    scores = [
        _score("engine", "a:8000/m", 12.0, parts),
        CapacityScore("engine", "z:8000/m", "other", None, {}, CapacityInputs(None, None, None, None, None)),
        _score("service", "vllm", 12.0, parts),
        CapacityScore("service", "other", "other", None, {}, CapacityInputs(None, None, None, None, None)),
    ]
    panel = capacity_panel(CapacityReport("ok", "", 0, 60, SETTINGS, scores))
    rows = [node for node in walk(panel) if "hs-capacity-row" in getattr(node, "className", "")]
    names = [texts(row)[0] for row in rows]
    assert names == ["vllm", "a:8000/m", "other", "z:8000/m"]  # services by name, each with its engines
    assert rows[0].className.endswith("hs-capacity-service") and rows[1].className.endswith("hs-capacity-engine")
    fills = [node.style["width"] for node in walk(rows[1]) if getattr(node, "className", "") == "hs-capacity-fill"]
    assert fills == ["47%", "0%", "0%", "69%"]
    assert "50% full" in texts(rows[1]) and "Queue 6.0 waiting, 4.0 running" in texts(rows[1])
    assert texts(rows[3])[1:] == ["—", "—", "—", "—", "—", "no data"]


def test_nothing_to_score_is_one_line() -> None:
    empty = capacity_panel(CapacityReport("ok", "", 0, 60, SETTINGS))
    assert isinstance(empty, html.P) and "no vLLM engine series" in texts(empty)[0]
    missing = capacity_panel(CapacityReport("not_configured", NOT_CONFIGURED, 0, 60, SETTINGS))
    assert isinstance(missing, html.P) and texts(missing) == [NOT_CONFIGURED]
    failing = capacity_panel(CapacityReport("unavailable", "Engine metrics unavailable: refused", 0, 60, SETTINGS))
    assert failing.className.startswith("hs-message") and texts(failing) == ["Engine metrics unavailable: refused"]
