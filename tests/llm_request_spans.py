"""vLLM ``llm_request`` spans of engines with known configurations and known timings, as an OTLP export request:
the inputs of the throughput-latency tests (``tests/query``, ``tests/api``), whose expected figures are computed
from the same :class:`EngineRun` values with numpy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from hotspan.server import RunningServer

NS = 1_000_000_000
T0 = 1_767_225_600 * NS
"""2026-01-01T00:00:00Z, a whole minute: buckets of a window starting here have round edges."""


@dataclass(frozen=True)
class EngineRun:
    """Requests one engine served: its resource attributes and per request the arrival (s after :data:`T0`),
    e2e latency and TTFT (s), and output tokens."""

    name: str
    resource: dict[str, str]
    arrivals_s: np.ndarray
    e2e_s: np.ndarray
    ttft_s: np.ndarray
    output_tokens: int

    def config(self, key: str) -> str:
        """The run's ``vllm.config.<key>`` value."""
        return self.resource[f"vllm.config.{key}"]


def engine_run(
    name: str,
    model: str,
    max_num_seqs: int,
    start_s: float,
    gap_s: float,
    count: int,
    e2e_s: float,
    ttft_s: float,
    tokens: int,
) -> EngineRun:
    """``count`` requests arriving every ``gap_s`` from ``start_s``; request *i* takes ``e2e_s * (1 + i / 50)``."""
    resource = {
        "service.name": "vllm",
        "vllm.config.model": model,
        "vllm.config.max_num_seqs": str(max_num_seqs),
        "vllm.config.max_num_batched_tokens": "4096",
        "vllm.config.enable_chunked_prefill": "true",
        "vllm.config.enable_prefix_caching": "true",
    }
    index = np.arange(count)
    return EngineRun(name, resource, start_s + gap_s * index, e2e_s * (1 + index / 50), np.full(count, ttft_s), tokens)


RUNS: tuple[EngineRun, ...] = (
    # Split over the first two minutes: arrivals 55..64 s.
    engine_run("seqs8", "llama-8b", 8, 55.0, 1.0, 10, 1.0, 0.2, 100),
    # Dominates seqs8: more requests per second at lower latency.
    engine_run("seqs32", "llama-8b", 32, 120.0, 0.5, 20, 0.5, 0.05, 100),
    # The most throughput, at the highest latency.
    engine_run("seqs128", "llama-8b", 128, 180.0, 0.25, 40, 2.0, 0.5, 50),
    # Another model, dominated by seqs32.
    engine_run("other", "qwen-7b", 8, 240.0, 1.0, 3, 3.0, 1.0, 10),
)
"""Four engine runs, one after the other (a sweep), in minutes 0-4 after :data:`T0`."""


def _value(value: str | int | float) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(double_value=value)


def _attributes(values: dict[str, str | int | float]) -> list[KeyValue]:
    return [KeyValue(key=key, value=_value(value)) for key, value in values.items()]


def export_request(runs: Sequence[EngineRun], *, seed: int = 0) -> ExportTraceServiceRequest:
    """One ``ExportTraceServiceRequest``: per run a resource with its attributes and one root ``llm_request`` span
    per request (its own trace, duration = e2e, vLLM's ``gen_ai.latency.*`` in seconds and
    ``gen_ai.usage.completion_tokens``), plus per run one ``chat`` span that is not vLLM's (to be ignored). Trace IDs
    are ``<request:08x><run:08x><seed + 1:016x>``."""
    request = ExportTraceServiceRequest()
    for number, run in enumerate(runs):
        spans = []
        for index, (arrival, e2e, ttft) in enumerate(zip(run.arrivals_s, run.e2e_s, run.ttft_s, strict=True)):
            start = T0 + round(arrival * NS)
            spans.append(
                Span(
                    trace_id=bytes.fromhex(f"{index:08x}{number:08x}{seed + 1:016x}"),
                    span_id=bytes.fromhex(f"{index + 1:016x}"),
                    name="llm_request",
                    kind=Span.SPAN_KIND_SERVER,
                    start_time_unix_nano=start,
                    end_time_unix_nano=start + round(e2e * NS),
                    attributes=_attributes(
                        {
                            "gen_ai.latency.e2e": float(e2e),
                            "gen_ai.latency.time_to_first_token": float(ttft),
                            "gen_ai.usage.completion_tokens": run.output_tokens,
                            "gen_ai.usage.prompt_tokens": 500,
                        }
                    ),
                )
            )
        spans.append(
            Span(
                trace_id=bytes.fromhex(f"{'f' * 8}{number:08x}{seed + 1:016x}"),
                span_id=bytes.fromhex("f" * 16),
                name="chat",
                kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=T0 + round(run.arrivals_s[0] * NS),
                end_time_unix_nano=T0 + round(run.arrivals_s[0] * NS) + 10 * NS,
                attributes=_attributes({"gen_ai.usage.completion_tokens": 999}),
            )
        )
        resource = ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])
        resource.resource.attributes.extend(_attributes(dict(run.resource)))
        request.resource_spans.append(resource)
    return request


def expected_point(run: EngineRun, first_s: float = -np.inf, end_s: float = np.inf) -> dict[str, float]:
    """What the view should report for ``run``'s requests arriving in ``[first_s, end_s)`` (s after :data:`T0`),
    computed with numpy: requests, output tokens, active seconds, requests/s, output tokens/s, e2e and TTFT
    p50/p95 in ms (linear interpolation, numpy's default)."""
    chosen = (run.arrivals_s >= first_s) & (run.arrivals_s < end_s)
    arrivals, e2e, ttft = run.arrivals_s[chosen], run.e2e_s[chosen], run.ttft_s[chosen]
    active = float(np.max(arrivals + e2e) - np.min(arrivals))
    return {
        "requests": int(chosen.sum()),
        "output_tokens": int(chosen.sum()) * run.output_tokens,
        "active_s": active,
        "requests_per_s": chosen.sum() / active,
        "output_tokens_per_s": chosen.sum() * run.output_tokens / active,
        "e2e_p50_ms": float(np.quantile(e2e, 0.5)) * 1e3,
        "e2e_p95_ms": float(np.quantile(e2e, 0.95)) * 1e3,
        "ttft_p50_ms": float(np.quantile(ttft, 0.5)) * 1e3,
        "ttft_p95_ms": float(np.quantile(ttft, 0.95)) * 1e3,
    }


def store_runs(server: RunningServer, runs: Sequence[EngineRun] = RUNS) -> None:
    """POST :func:`export_request` of ``runs`` to ``server``'s ``/v1/traces`` (OTLP/HTTP protobuf) and wait until
    the ingest pipeline has stored it."""
    answer = httpx.post(
        f"{server.base_url}/v1/traces",
        content=export_request(runs).SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert server.pipeline is not None and server.pipeline.flush()
