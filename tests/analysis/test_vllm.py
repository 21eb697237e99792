"""vLLM's llm_request split into phases, and per-call TTFT/TPOT (analysis.vllm, analysis.stages)."""

from __future__ import annotations

import polars as pl
import pytest
from analysis_support import T0, S, frame

from analysis.model_calls import model_calls
from analysis.spans import ATTRIBUTES
from analysis.stages import stage_pieces
from analysis.trace_analysis import analyze
from analysis.vllm import llm_calls
from units import NS_PER_MS as MS


def engine_span(span_id: str, start: int, end: int, **seconds: str) -> S:
    attributes = {f"gen_ai.latency.{key}": value for key, value in seconds.items() if key != "tokens"}
    if "tokens" in seconds:
        attributes["gen_ai.usage.completion_tokens"] = seconds["tokens"]
    return S(span_id, "", start, end, "llm_request", "vllm", "Server", attributes)


def phases(span: S) -> dict[str, tuple[int, int]]:
    pieces = stage_pieces(frame([span]))
    return {row["stage"]: (row["start_ns"] - T0, row["end_ns"] - T0) for row in pieces.iter_rows(named=True)}


def test_queue_prefill_and_decode_fill_the_span_when_the_attributes_do() -> None:
    # 530 ms span; queue 12.5 ms + prefill 67.5 ms + decode 450 ms = 530 ms, TTFT = queue + prefill = 80 ms.
    span = engine_span(
        "e",
        0,
        530 * MS,
        time_in_queue="0.0125",
        time_in_model_prefill="0.0675",
        time_in_model_decode="0.45",
        time_to_first_token="0.08",
    )
    split = phases(span)
    assert split == {
        "llm.tokenize": (0, 0),
        "llm.queue": (0, 12_500_000),
        "llm.prefill": (12_500_000, 80 * MS),
        "llm.decode": (80 * MS, 530 * MS),
        "llm.detokenize": (530 * MS, 530 * MS),
    }
    queue, prefill, decode = (split[p][1] - split[p][0] for p in ("llm.queue", "llm.prefill", "llm.decode"))
    assert queue + prefill + decode == 530 * MS


def test_float_seconds_round_to_the_ns() -> None:
    # Seconds as Go's %g writes them; q + p + d = 0.1 s up to float error, the span 100 ms.
    span = engine_span(
        "e", 0, 100 * MS, time_in_queue="0.01", time_in_model_prefill="0.02", time_in_model_decode="0.07"
    )
    split = phases(span)
    total = sum(
        end - start for stage, (start, end) in split.items() if stage in ("llm.queue", "llm.prefill", "llm.decode")
    )
    assert abs(total - 100 * MS) <= 2
    assert sum(end - start for start, end in split.values()) == 100 * MS


def test_time_before_the_queue_and_after_the_last_token_is_tokenize_and_detokenize() -> None:
    # Arrival at 0; TTFT 31 ms with queue 10 + prefill 20 -> queued at 1 ms (1 ms of input processing);
    # decode 50 ms -> last token at 81 ms; the span ends at 85 ms -> 4 ms of output processing.
    span = engine_span(
        "e",
        0,
        85 * MS,
        time_in_queue="0.01",
        time_in_model_prefill="0.02",
        time_in_model_decode="0.05",
        time_to_first_token="0.031",
    )
    assert phases(span) == {
        "llm.tokenize": (0, 1 * MS),
        "llm.queue": (1 * MS, 11 * MS),
        "llm.prefill": (11 * MS, 31 * MS),
        "llm.decode": (31 * MS, 81 * MS),
        "llm.detokenize": (81 * MS, 85 * MS),
    }


def test_without_ttft_the_queue_starts_at_arrival() -> None:
    span = engine_span("e", 0, 90 * MS, time_in_queue="0.01", time_in_model_prefill="0.02", time_in_model_decode="0.05")
    assert phases(span)["llm.queue"] == (0, 10 * MS)
    assert phases(span)["llm.detokenize"] == (80 * MS, 90 * MS)


def test_attributes_longer_than_the_span_are_clipped_and_still_sum_to_it() -> None:
    # Decode says 200 ms but the span is 100 ms long: decode is cut at the span's end.
    span = engine_span(
        "e",
        0,
        100 * MS,
        time_in_queue="0.01",
        time_in_model_prefill="0.02",
        time_in_model_decode="0.2",
        time_to_first_token="0.03",
    )
    split = phases(span)
    assert split["llm.decode"] == (30 * MS, 100 * MS)
    assert sum(end - start for start, end in split.values()) == 100 * MS


@pytest.mark.parametrize(
    "attributes",
    [
        {},
        {"time_in_queue": "0.01", "time_in_model_prefill": "0.02"},
        {"time_in_queue": "x", "time_in_model_prefill": "0.02", "time_in_model_decode": "0.01"},
    ],
)
def test_missing_or_unreadable_latencies_leave_the_span_whole(attributes: dict[str, str]) -> None:
    assert phases(engine_span("e", 0, 50, **attributes)) == {"other": (0, 50)}


def test_llm_calls_ttft_and_tpot() -> None:
    # TPOT = decode / (completion tokens - 1), vLLM's definition: 0.45 s / 9 = 50 ms.
    spans = frame(
        [
            engine_span("a", 0, 500 * MS, time_in_model_decode="0.45", time_to_first_token="0.05", tokens="10"),
            engine_span("b", 0, 100 * MS, time_in_model_decode="0", time_to_first_token="0.1", tokens="1"),
            # A client span's first-token time is a model call's (analysis.model_calls), not an engine call's.
            S("c", "", 0, 10, "chat", attributes={"gen_ai.server.time_to_first_token": "2"}),
            S("d", "", 0, 10, "other"),
        ]
    )
    calls = {row["span_id"]: row for row in llm_calls(spans).iter_rows(named=True)}
    assert set(calls) == {"a", "b"}
    assert (calls["a"]["ttft_ns"], calls["a"]["decode_ns"], calls["a"]["tpot_ns"]) == (50 * MS, 450 * MS, 50 * MS)
    assert calls["b"]["tpot_ns"] is None


def test_an_engine_call_no_span_names_a_model_for_takes_its_engines_served_model() -> None:
    # vLLM v1's llm_request names no model; the engine's resource does (vllm.config.model). Under a client call
    # that names one (t1) the client's wins, the model the request asked for; alone (t2) the engine's is used.
    client = S("c", "", 0, 100 * MS, "chat", "agent", "Client", {"gen_ai.operation.name": "chat", "model": "alias"})
    spans = [
        client,
        S("e", "c", 10 * MS, 90 * MS, "llm_request", "vllm", "Server", {"gen_ai.usage.prompt_tokens": "7"}),
        S("f", "", 0, 50 * MS, "llm_request", "vllm", "Server", {"gen_ai.usage.prompt_tokens": "5"}, trace_id="t2"),
    ]
    served = {"vllm.config.model": "meta-llama/Llama-3.1-8B-Instruct"}
    spans_frame = frame(spans).with_columns(pl.Series("resource_attributes", [{}, served, served], dtype=ATTRIBUTES))
    calls = model_calls(analyze(spans_frame))
    assert dict(zip(calls["span_id"], calls["model"], strict=True)) == {
        "c": "alias",
        "e": "alias",
        "f": "meta-llama/Llama-3.1-8B-Instruct",
    }
    # A frame without resources (not the reader's) names no model for the lone engine call.
    assert model_calls(analyze(frame(spans)))["model"].to_list() == ["alias", "alias", None]
