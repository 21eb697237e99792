"""Per-span cost of the OTel SDK, bare versus with Hotspan's three SDK components, side by side.

Both pipelines export through ``BatchSpanProcessor`` into an ``InMemorySpanExporter``. Each workload
makes ``--traces`` traces under ``start_as_current_span``, the usual instrumentation pattern, with
``tenant_id`` and ``sample_policy`` baggage attached, then flushes, so the exporter thread's work is
inside the timing.

"full" adds ``BaggageSampler`` (three policies that this baggage does not match, default ratio 1.0,
so both pipelines keep every span), ``BaggageSpanProcessor`` copying ``tenant_id`` (``sample_policy``
is not copied: the sampler records the policy that decided) and ``HotspotSpanProcessor`` (a static
rule plus adaptive p95, about 5% of spans flagged) wrapping the batch processor. Each extra copied key
costs about one microsecond per span, mostly the SDK's ``set_attribute``.

Three workloads, each timed bare and full:

* ``stack``: one chat request of the instrumented agent stack (``hotspan stack run``), span for span
  as its gateway and agent emit it: 9 spans (HTTP server and client spans, admission, invoke_agent,
  plan, the GenAI chat call, tokenize, parse_output) with the attribute names, value types and counts
  captured from a run of the stack (7.7 attributes per span there, 7.6 here; the counts set at start
  and at end as its instrumentation sets them). The headline figure, printed last: these are the
  services the processors are for.
* ``light``: four nested spans with 14 attributes over the four (HTTP on the first, GenAI on the
  last), fewer than instrumented services set.
* ``empty``: spans without attributes, the SDK's cheapest span and so the largest relative overhead.

Each run is timed in process CPU time (caller and exporter thread together). Repetitions alternate the
order of the pipelines and the medians are compared, so drift (CPU frequency, other load) hits both alike.

Run: ``python benchmarks/sdk_overhead.py [--reps 15] [--traces 1000]``. The last line is
``overhead_ratio: X.XX`` (full / bare median per-span time, stack workload; goal <= 1.10); the lines
before it give the ratio of the other workloads.
"""

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from opentelemetry import baggage, context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hotspan_sdk import (
    AdaptiveConfig,
    BaggageSampler,
    BaggageSpanProcessor,
    HotspotSpanProcessor,
    StaticRule,
)

POLICIES = {
    "default_ratio": 1.0,
    "policies": [
        {"match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"match": {"sample_policy": "off"}, "sample": "never"},
        {"match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"},
    ],
}
GATEWAY_ATTRIBUTES = {
    "http.request.method": "POST",
    "url.path": "/v1/chat/completions",
    "http.route": "/v1/chat/completions",
    "server.address": "gateway",
    "server.port": 8080,
    "http.response.status_code": 200,
}
AGENT_ATTRIBUTES = {"agent.step": "plan", "agent.iteration": 1}
TOOL_ATTRIBUTES = {"tool.name": "search", "tool.call.id": "call-1"}
LLM_ATTRIBUTES = {
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "vllm",
    "gen_ai.request.model": "llama-3-8b",
    "gen_ai.usage.input_tokens": 512,
}

GATEWAY_SERVER = {
    "http.scheme": "http",
    "http.host": "127.0.0.1:35273",
    "net.host.port": 35273,
    "http.flavor": "1.1",
    "http.target": "/v1/agent",
    "http.url": "http://127.0.0.1:35273/v1/agent",
    "http.method": "POST",
    "http.server_name": "127.0.0.1:35273",
    "http.user_agent": "python-httpx/0.28.1",
    "net.peer.ip": "127.0.0.1",
    "net.peer.port": 35984,
    "http.route": "/v1/agent",
    "gateway.priority_tier": "P1",
}
ADMISSION = {
    "gateway.priority_tier": "P1",
    "gateway.sla_s": 20.0,
    "gateway.estimated_wait_s": 0.0,
    "gateway.queue_wait_s": 0.0,
}
AGENT_SERVER = {**GATEWAY_SERVER, "http.target": "/v1/invoke", "http.route": "/v1/invoke"}
del AGENT_SERVER["gateway.priority_tier"]
INVOKE_AGENT = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "support-agent",
    "agent.plan.max_steps": 4,
    "agent.intent": "chat",
    "agent.plan.steps": ("answer",),
}
CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "vllm",
    "gen_ai.request.model": "meta-llama/Llama-3.1-8B-Instruct",
    "gen_ai.request.max_tokens": 55,
    "gen_ai.request.temperature": 0.7,
    "gen_ai.request.top_p": 0.95,
    "server.address": "127.0.0.1",
    "server.port": 34633,
    "llm.prompt.sha256": "e7f10d89938e117c",
}
CHAT_RESPONSE = {
    "gen_ai.response.id": "chatcmpl-c57399fd24aa4014918c0a93477121aa",
    "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
    "gen_ai.response.finish_reasons": ("length",),
    "gen_ai.usage.input_tokens": 879,
    "gen_ai.usage.output_tokens": 55,
}

Workload = Callable[[Tracer, int], None]


def stack_workload(tracer: Tracer, traces: int) -> None:
    """One chat request of the instrumented stack per trace: 9 spans, gateway then agent."""
    for _ in range(traces):
        with tracer.start_as_current_span("POST /v1/agent", kind=SpanKind.SERVER, attributes=GATEWAY_SERVER) as gateway:
            with tracer.start_as_current_span("admission P1", attributes=ADMISSION):
                pass
            with tracer.start_as_current_span(
                "POST", kind=SpanKind.CLIENT, attributes={"http.method": "POST", "http.url": AGENT_SERVER["http.url"]}
            ) as client:
                with tracer.start_as_current_span(
                    "POST /v1/invoke", kind=SpanKind.SERVER, attributes=AGENT_SERVER
                ) as agent:
                    with tracer.start_as_current_span("invoke_agent support-agent", attributes=INVOKE_AGENT):
                        with tracer.start_as_current_span("plan support-agent", attributes={"agent.intent": "chat"}):
                            pass
                        with tracer.start_as_current_span(
                            "chat meta-llama/Llama-3.1-8B-Instruct", kind=SpanKind.CLIENT, attributes=CHAT
                        ) as chat:
                            with tracer.start_as_current_span(
                                "tokenize", attributes={"llm.prompt_tokens": 879, "llm.tokenizer.worker": 0}
                            ):
                                pass
                            with tracer.start_as_current_span("parse_output", attributes={"llm.output.chars": 283}):
                                pass
                            chat.set_attributes(CHAT_RESPONSE)
                    agent.set_attribute("http.status_code", 200)
                client.set_attribute("http.status_code", 200)
            gateway.set_attribute("http.status_code", 200)


def light_workload(tracer: Tracer, traces: int) -> None:
    """Four nested spans per trace with 14 attributes set at start."""
    for _ in range(traces):
        with (
            tracer.start_as_current_span("POST /v1/chat", kind=SpanKind.SERVER, attributes=GATEWAY_ATTRIBUTES),
            tracer.start_as_current_span("agent.plan", attributes=AGENT_ATTRIBUTES),
            tracer.start_as_current_span("tool.call", attributes=TOOL_ATTRIBUTES),
            tracer.start_as_current_span("chat llama-3-8b", kind=SpanKind.CLIENT, attributes=LLM_ATTRIBUTES),
        ):
            pass


def empty_workload(tracer: Tracer, traces: int) -> None:
    """Four nested spans per trace without attributes."""
    for _ in range(traces):
        with (
            tracer.start_as_current_span("gateway.request"),
            tracer.start_as_current_span("agent.plan"),
            tracer.start_as_current_span("tool.call"),
            tracer.start_as_current_span("llm.request"),
        ):
            pass


def _batch(exporter: InMemorySpanExporter) -> BatchSpanProcessor:
    # A queue larger than one run holds, so neither pipeline drops spans (dropping is cheaper).
    return BatchSpanProcessor(exporter, max_queue_size=1 << 17, max_export_batch_size=512)


def bare_pipeline() -> tuple[TracerProvider, InMemorySpanExporter]:
    """The SDK as users run it without Hotspan: default sampler, batch processor."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(_batch(exporter))
    return provider, exporter


def full_pipeline() -> tuple[TracerProvider, InMemorySpanExporter]:
    """The same plus BaggageSampler, BaggageSpanProcessor and HotspotSpanProcessor."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench"}),
        sampler=BaggageSampler.from_config(POLICIES),
    )
    provider.add_span_processor(BaggageSpanProcessor(["tenant_id"]))
    provider.add_span_processor(
        HotspotSpanProcessor(
            _batch(exporter),
            rules=[StaticRule(threshold_ms=250.0, name="db.*")],
            adaptive=AdaptiveConfig(),
        )
    )
    return provider, exporter


def run_once(provider: TracerProvider, exporter: InMemorySpanExporter, workload: Workload, traces: int) -> float:
    """CPU seconds per exported span for one run, flush included.

    CPU time of the whole process (both the caller's and the exporter thread's work) rather than wall
    time: it is the cost a service pays, and other processes competing for the cores barely move it.
    """
    tracer = provider.get_tracer("bench")
    gc.collect()
    start = time.process_time()
    workload(tracer, traces)
    provider.force_flush()
    elapsed = time.process_time() - start
    exported = exporter.get_finished_spans()
    exporter.clear()
    if len({span.context.trace_id for span in exported}) != traces:
        raise RuntimeError(f"expected spans of {traces} traces, got {len(exported)} spans")
    return elapsed / len(exported)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15, help="repetitions per pipeline and workload")
    parser.add_argument("--traces", type=int, default=1000, help="traces per repetition")
    args = parser.parse_args()

    workloads: dict[str, Workload] = {"empty": empty_workload, "light": light_workload, "stack": stack_workload}
    pipelines = {"bare": bare_pipeline(), "full": full_pipeline()}
    runs = [(workload, pipeline) for workload in workloads for pipeline in pipelines]
    samples: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    token = context.attach(baggage.set_baggage("sample_policy", "normal", baggage.set_baggage("tenant_id", "acme")))
    try:
        for workload, pipeline in runs:  # warm-up: imports, caches, adaptive sketches
            run_once(*pipelines[pipeline], workloads[workload], args.traces)
        for rep in range(args.reps):
            for workload, pipeline in runs if rep % 2 == 0 else reversed(runs):
                samples[workload, pipeline].append(run_once(*pipelines[pipeline], workloads[workload], args.traces))
    finally:
        context.detach(token)
        for provider, _ in pipelines.values():
            provider.shutdown()

    medians = {run: statistics.median(values) for run, values in samples.items()}
    header = f"{'workload':<8} {'pipeline':<8} {'median cpu us/span':>19} {'min':>8} {'max':>8}"
    print(f"{header}  ({args.reps} reps x {args.traces} traces)")
    for (workload, pipeline), values in samples.items():
        median_us = medians[workload, pipeline] * 1e6
        print(f"{workload:<8} {pipeline:<8} {median_us:>19.2f} {min(values) * 1e6:>8.2f} {max(values) * 1e6:>8.2f}")
    for workload in ("empty", "light"):
        print(f"overhead_ratio_{workload}: {medians[workload, 'full'] / medians[workload, 'bare']:.2f}")
    print(f"overhead_ratio: {medians['stack', 'full'] / medians['stack', 'bare']:.2f}")


if __name__ == "__main__":
    main()
