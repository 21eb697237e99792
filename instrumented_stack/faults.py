"""Fault switches: one per cause, each a documented change of the stack's configuration.

A fault is data (:data:`FAULTS`): what it changes, which stage it should move, and the configuration it
applies. :func:`apply_faults` turns a clean :class:`StackConfig` into the faulty one; services only ever see
ordinary settings (``max_num_seqs``, ``tool_validation``, ...), so no span names a fault - the fault list is
the answer key, recorded only in the run manifest. Stages are Hotspan's (``analysis.stage_rules.STAGES``).

The table in ``instrumented_stack/README.md`` lists the same faults with the change measured by the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instrumented_stack.batch_load import BatchLoadConfig
from instrumented_stack.stack import StackConfig

Patch = Callable[[StackConfig], StackConfig]


def _engine(config: StackConfig, **scheduler: object) -> StackConfig:
    updated = config.engine.scheduler.model_copy(update=scheduler)
    return config.model_copy(update={"engine": config.engine.model_copy(update={"scheduler": updated})})


def _agent(config: StackConfig, **fields: object) -> StackConfig:
    return config.model_copy(update={"agent": config.agent.model_copy(update=fields)})


def _retrieval_blowup(config: StackConfig) -> StackConfig:
    config = _agent(config, retrieval_top_k=200)
    return config.model_copy(update={"retriever": config.retriever.model_copy(update={"deserialize": "json"})})


def _connection_per_request(config: StackConfig) -> StackConfig:
    return _agent(config, llm_connection="per_request").model_copy(update={"engine_tls": True})


def _tier_flood(config: StackConfig) -> StackConfig:
    update = {"max_in_flight": TIER_FLOOD_SLOTS, "admission_order": "fifo"}
    gateway = config.gateway.model_copy(update=update)
    return config.model_copy(update={"gateway": gateway, "batch_load": TIER_FLOOD})


TIER_FLOOD_SLOTS = 8
"""Gateway slots under the tier flood: more than the six users of the fault runs, so they alone never wait."""
TIER_FLOOD = BatchLoadConfig(
    after_requests=3,
    rate_per_s_per_s=200.0,
    max_rate_per_s=40.0,
    max_requests=240,
    max_tokens=256,
)
"""The flood: 240 long requests (256 tokens) from the gateway's third request (the users': on a busy host they
can come a second after the stack opens, and the default open-loop replay's first rows seconds apart, after a
flood timed from the opening; from the third, every tier of the default tenants has started), the rate rising
to 40 requests/s within 0.2 s, so all are sent over about 6 s, twice what the eight slots serve: in arrival order
they hold the slots and queue ahead of the users' requests for about ten seconds at speed 20, long enough for a
handful of the P0 users' requests to arrive at the default rate (about 2 requests/s, a third of them P0). The
first flood (60 requests from the first request) was over before the default replay's first P0 request."""


def _decode_bound(config: StackConfig) -> StackConfig:
    return _agent(_engine(config, max_num_seqs=256), output_tokens_factor=8.0)


BLOCKING_LOOKUP_S = 0.1
"""Catalogue lookup latency under ``event_loop_blocking``, seconds: long enough that other requests' work
arrives during a blocking call at the stack's default rate."""


def _event_loop_blocking(config: StackConfig) -> StackConfig:
    tools = config.tools.model_copy(update={"lookup_latency_s": max(config.tools.lookup_latency_s, BLOCKING_LOOKUP_S)})
    return _agent(config, tool_calls="blocking").model_copy(update={"tools": tools})


@dataclass(frozen=True, slots=True)
class Fault:
    """One switch: ``name``, ``changes`` (what it does), ``stage`` (what it should move), ``patch``."""

    name: str
    changes: str
    stage: str
    patch: Patch


FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in (
        Fault(
            "queue_saturation",
            "engine max_num_seqs 64 -> 1: requests wait in the scheduler's queue (at the default open-loop rate, "
            "about two requests a second, two sequences at once rarely queued)",
            "llm.queue",
            lambda c: _engine(c, max_num_seqs=1),
        ),
        Fault(
            "prefix_cache_off",
            "engine prefix caching disabled: every prompt token is prefilled",
            "llm.prefill",
            lambda c: _engine(c, enable_prefix_caching=False),
        ),
        Fault(
            "tokenizer_cold_start",
            "LLM client tokenizer workers recycled after every request: each call loads tokenizer.json",
            "llm.tokenize",
            lambda c: _agent(c, tokenizer_max_requests=1),
        ),
        Fault(
            "connection_per_request",
            "engine serves HTTPS with a certificate made at start; the LLM client opens a new "
            "connection (TCP + TLS handshake) per call",
            "network",
            _connection_per_request,
        ),
        Fault(
            "decode_bound",
            "agent asks for 8x the output tokens and the engine runs up to 256 sequences per batch",
            "llm.decode",
            _decode_bound,
        ),
        Fault(
            "orchestration_cpu_hotspot",
            "tool arguments validated by rebuilding and re-checking every tool's JSON Schema per call",
            "agent",
            lambda c: _agent(c, tool_validation="per_call"),
        ),
        Fault(
            "redundant_llm_calls",
            "agent sends the same answer prompt twice",
            "llm",
            lambda c: _agent(c, llm_calls_per_answer=2),
        ),
        Fault(
            "retrieval_topk_blowup",
            "agent asks the retriever for top_k 200 instead of 4; retriever parses stored JSON payloads "
            "(vectors included) per hit",
            "retrieval",
            _retrieval_blowup,
        ),
        Fault(
            "event_loop_blocking",
            f"agent calls the tool service with a synchronous HTTP client inside its async handler, and catalogue "
            f"lookups take {BLOCKING_LOOKUP_S * 1e3:.0f} ms (a blocking client on a 2 ms call stalls nobody)",
            "agent",
            _event_loop_blocking,
        ),
        Fault(
            "oversized_responses",
            "catalogue lookups return the product's 1.8 MB of base64 attachments beside the result, uncompressed",
            "tool",
            lambda c: c.model_copy(update={"tools": c.tools.model_copy(update={"lookup_attachment_bytes": 1_800_000})}),
        ),
        Fault(
            "tier_flood",
            f"a P2 batch tenant sends {TIER_FLOOD.max_requests} requests of {TIER_FLOOD.max_tokens} tokens from "
            f"the gateway's request {TIER_FLOOD.after_requests}, the rate rising by "
            f"{TIER_FLOOD.rate_per_s_per_s:.0f} requests/s every second (up to {TIER_FLOOD.max_rate_per_s:.0f}/s), "
            f"while the gateway admits {TIER_FLOOD_SLOTS} requests at once (64 before) in arrival order, whatever "
            "their tier: P0 requests queue behind the batch backlog (up to P2's SLA, 5 s of it)",
            "gateway",
            _tier_flood,
        ),
    )
}


def parse_faults(text: str | None) -> tuple[str, ...]:
    """Fault names from a comma-separated list (blank items ignored, duplicates dropped, order kept).

    Raises:
        ValueError: an unknown name; the message lists the known ones.
    """
    names = tuple(dict.fromkeys(item.strip() for item in (text or "").split(",") if item.strip()))
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    return names


def apply_faults(config: StackConfig, faults: Iterable[str]) -> StackConfig:
    """``config`` with each named fault applied, in order. Raises ``KeyError`` for an unknown name."""
    for name in faults:
        config = FAULTS[name].patch(config)
    return config
