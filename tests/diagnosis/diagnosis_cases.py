"""For each rule, a hand-built window that shows its cause (``trigger``) and one that comes close without
showing it (``near_miss``). Numbers are in ms and sized so each case sits clearly on its side of the rule's
packaged thresholds (``diagnosis/rules.yaml``); the tests state the margins."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from diagnosis_support import Chat, Request, SpanSpec, build, build_all, clean_requests

from diagnosis import EngineMetrics


def queue_saturation(queue_ms: float) -> list[SpanSpec]:
    """12 requests arriving 20 ms apart onto one engine, calling no tool; each waits ``queue_ms`` more than the
    one before (queueing grows with the requests already in flight)."""
    return build_all(
        Request(
            trace=i, start_ms=i * 20.0, tool_ms=None, chats=(Chat(prompt=f"queued {i}", queue_ms=queue_ms * (i + 1)),)
        )
        for i in range(12)
    )


def prefix_repeats(
    repeat_prefill_ms: float, cached_tokens: int | None = None, *, on_agent: bool = False
) -> list[SpanSpec]:
    """12 sequential requests in three conversations (``gen_ai.conversation.id``) of 3,000-token prompts: the
    first call of a conversation prefills in 60 ms, the nine later ones in ``repeat_prefill_ms``. The
    conversation is named on the chat call, or with ``on_agent`` on the agent's ``invoke_agent`` span only
    (the call then carries only its own prompt's hash)."""
    requests = []
    for i in range(12):
        first = i < 3
        conversation = f"conversation-{i % 3}"
        chat = Chat(
            prompt=f"turn {i}",
            conversation=None if on_agent else conversation,
            prompt_tokens=3_000,
            prefill_ms=60.0 if first else repeat_prefill_ms,
            cached_tokens=None if first or cached_tokens is None else cached_tokens,
        )
        agent_conversation = conversation if on_agent else None
        requests.append(Request(trace=i, start_ms=i * 250.0, chats=(chat,), conversation=agent_conversation))
    return build_all(requests)


def prefix_metrics(queries: float, hits: float, prompt_tokens: float = 36_000) -> EngineMetrics:
    """Engine metrics over a window with the given prefix-cache counter increases (tokens)."""
    return EngineMetrics(
        source="http://prometheus.test",
        prefix_cache_queries_tokens=queries,
        prefix_cache_hits_tokens=hits,
        prompt_tokens=prompt_tokens,
    )


def tokenizer_loads(every_call: bool, traced: bool = True, load_ms: float = 5.0) -> list[SpanSpec]:
    """16 requests over four tokenizer workers. Loading (``load_ms``) happens on every call, or only on each
    worker's first; ``traced=False`` records no ``load_tokenizer`` span, only a slower ``tokenize``."""
    requests = []
    for i in range(16):
        cold = every_call or i < 4
        chat = Chat(
            prompt=f"tokenizing {i}",
            tokenizer_worker=i % 4,
            load_tokenizer_ms=load_ms if cold and traced else 0.0,
            tokenize_ms=0.6 + (load_ms if cold and not traced else 0.0),
        )
        requests.append(Request(trace=i, start_ms=i * 120.0, chats=(chat,)))
    return build_all(requests)


def tokenizer_reloads_untraced() -> list[SpanSpec]:
    """16 requests over four workers, no loading spans: each worker's first call and its last two take 8 ms
    longer (two thirds of the calls after a worker's first reload)."""
    requests = []
    for i in range(16):
        cold = i < 4 or i >= 8
        chat = Chat(prompt=f"q{i}", tokenizer_worker=i % 4, tokenize_ms=8.6 if cold else 0.6)
        requests.append(Request(trace=i, start_ms=i * 120.0, chats=(chat,)))
    return build_all(requests)


def connections(connecting: int, tls_ms: float = 6.0, count: int = 10, every_ms: float = 150.0) -> list[SpanSpec]:
    """``count`` requests, one every ``every_ms`` (one after another at the default 150 ms); the first
    ``connecting`` LLM calls open a TCP connection (3 ms) and do a TLS handshake (``tls_ms``)."""
    return build_all(
        Request(
            trace=i,
            start_ms=i * every_ms,
            chats=(
                Chat(
                    prompt=f"connecting {i}",
                    connect_ms=3.0 if i < connecting else 0.0,
                    tls_ms=tls_ms if i < connecting else 0.0,
                ),
            ),
        )
        for i in range(count)
    )


def decode_heavy(batched: bool) -> list[SpanSpec]:
    """Requests generating 40 tokens. Not batched: 12, one after another, 400 ms of decode each. Batched: 12
    alone at 300 ms, then two rounds of eight at once at 700 ms each (TPOT 2.3x in a batch of eight)."""
    if not batched:
        return build_all(
            Request(trace=i, start_ms=i * 600.0, chats=(Chat(prompt=f"long {i}", decode_ms=400.0),)) for i in range(12)
        )
    alone = [
        Request(trace=i, start_ms=i * 500.0, chats=(Chat(prompt=f"alone {i}", decode_ms=300.0),)) for i in range(12)
    ]
    together = [
        Request(
            trace=12 + i, start_ms=7_000.0 + (i // 8) * 1_000.0, chats=(Chat(prompt=f"batch {i}", decode_ms=700.0),)
        )
        for i in range(16)
    ]
    return build_all(alone + together)


def validation(validate_ms: float) -> list[SpanSpec]:
    """The clean window with tool argument validation taking ``validate_ms`` per call."""
    return build_all(replace(request, validate_ms=validate_ms) for request in clean_requests())


def repeated_prompts(same: bool, first_fails: bool = False, hashed: bool = True) -> list[SpanSpec]:
    """10 requests with two 20 ms-decode chat calls each: the same prompt twice (``same``; the engine's prefix
    cache serves the repeat, so its prefill is short) or two different ones; the first may fail (a retry
    follows), and prompts may go unhashed (only model and token counts to compare)."""
    requests = []
    for i in range(10):
        first = Chat(prompt=f"q{i}", status="Error" if first_fails else "Unset", prompt_hashed=hashed, decode_ms=20.0)
        second = Chat(
            prompt=f"q{i}" if same else f"q{i} with the tool result",
            prompt_hashed=hashed,
            decode_ms=20.0,
            prefill_ms=1.0 if same else 8.0,
        )
        requests.append(Request(trace=i, start_ms=i * 200.0, chats=(first, second)))
    return build_all(requests)


def retrieval(top_k: int, deserialize_ms: float, retrieval_ms: float = 1.0) -> list[SpanSpec]:
    """The clean window with retrieval asking for ``top_k`` documents and decoding them in ``deserialize_ms``."""
    return build_all(
        replace(request, retrieval_top_k=top_k, deserialize_ms=deserialize_ms, retrieval_ms=retrieval_ms)
        for request in clean_requests()
    )


def loop_blocking(
    response_lag_ms: float, count: int = 8, *, first_trace: int = 0, agent_instance: str = "agent-1"
) -> list[SpanSpec]:
    """``count`` requests, 60 ms apart, each making a 50 ms tool call and then a 30 ms LLM call. Each LLM call ends
    during the next request's tool call; the agent reacts to its answer ``response_lag_ms`` later. A blocked
    loop reacts only after that tool call returns (35 ms); a free loop at once (0.5 ms). Requests are numbered from
    ``first_trace`` and served by the agent instance ``agent_instance``."""
    return build_all(
        Request(
            trace=first_trace + i,
            agent_instance=agent_instance,
            start_ms=i * 60.0,
            retrieval_top_k=None,
            tool_ms=50.0,
            chats=(
                Chat(
                    prompt=f"q{i}",
                    prefill_ms=5.0,
                    decode_ms=25.0,
                    queue_ms=0.1,
                    response_lag_ms=response_lag_ms,
                ),
            ),
        )
        for i in range(count)
    )


def idle_loop() -> list[SpanSpec]:
    """Requests whose tool calls only ever overlap other requests' long LLM waits: nothing arrives during a tool
    call, so an idle loop looks frozen, and must not be mistaken for a blocked one."""
    return build_all(
        Request(
            trace=i,
            start_ms=i * 60.0,
            retrieval_top_k=None,
            tool_ms=50.0,
            chats=(Chat(prompt=f"q{i}", decode_ms=400.0),),
        )
        for i in range(8)
    )


def busy_host(
    stretched: tuple[str, ...] = ("gateway", "agent", "retriever", "tools"), unhurried_every: int = 2
) -> list[SpanSpec]:
    """30 healthy requests, 45 ms apart; in all but every ``unhurried_every``-th one (every other one by default)
    the named services wait for a CPU: the gateway
    8 ms before calling the agent; the agent 8 ms in tokenizing, in validating tool arguments and before reading
    the LLM's answer; the retriever 8 ms in its vector search and its decoding; the tools service 25 ms in its
    lookup. Each wait is well past its span's usual self time (5 ms and 1x the baseline are the packaged line)."""
    wait_ms = 8.0
    return build_all(
        replace(
            request,
            gateway_ms=request.gateway_ms + wait_ms * ("gateway" in stretched and waits),
            validate_ms=request.validate_ms + wait_ms * ("agent" in stretched and waits),
            retrieval_ms=request.retrieval_ms + wait_ms * ("retriever" in stretched and waits),
            deserialize_ms=request.deserialize_ms + wait_ms * ("retriever" in stretched and waits),
            tool_ms=(request.tool_ms or 0.0) + 25.0 * ("tools" in stretched and waits),
            chats=tuple(
                replace(
                    chat,
                    tokenize_ms=chat.tokenize_ms + wait_ms * ("agent" in stretched and waits),
                    response_lag_ms=chat.response_lag_ms + wait_ms * ("agent" in stretched and waits),
                )
                for chat in request.chats
            ),
        )
        for request in clean_requests(30)
        for waits in [request.trace % unhurried_every != 0]
    )


def cpu_pressure(waiting_share: float) -> EngineMetrics:
    """Metrics of a host whose tasks waited for a CPU ``waiting_share`` (0..1) of the window (PSI cpu some)."""
    return EngineMetrics(
        source="http://prometheus.test", cpu_waiting_share=waiting_share, cpu_waiting_instance="node-1"
    )


def tool_calls_with(attributes: Mapping[str, str], count: int = 6, tool_ms: float = 20.0) -> list[SpanSpec]:
    """``count`` requests 200 ms apart whose tool CLIENT span (the agent's POST to the tool service) carries
    ``attributes`` (body sizes, encodings)."""
    spans = build_all(Request(trace=i, start_ms=i * 200.0, tool_ms=tool_ms) for i in range(count))
    return [
        replace(span, attributes={**span.attributes, **attributes}) if is_tool_client(span) else span for span in spans
    ]


def is_tool_client(span: SpanSpec) -> bool:
    """Whether ``span`` is the agent's HTTP CLIENT span calling the tool service."""
    return span.kind == "Client" and "/v1/tools/" in span.attributes.get("http.url", "")


TIER_HALF_MS = 1_000.0


def tiered_request(
    number: int, start_ms: float, tier: str, queue_ms: float, extra: Mapping[str, str]
) -> list[SpanSpec]:
    """One request whose gateway SERVER span carries ``gateway.priority_tier`` (and ``extra``)."""
    spans = build(Request(trace=number, start_ms=start_ms, chats=(Chat(queue_ms=queue_ms, prompt=f"q{number}"),)))
    tagged = {"gateway.priority_tier": tier, **extra}
    return [replace(span, attributes={**span.attributes, **tagged}) if not span.parent else span for span in spans]


def tier_window(
    p2_first: int,
    p2_second: int,
    p0_queue_second_ms: float,
    p0_drops_second: int = 0,
    p0_caught_first: int = 0,
    p0_per_half: int = 8,
) -> list[SpanSpec]:
    """Two 1 s halves: ``p0_per_half`` P0 requests in each (the second half's waiting ``p0_queue_second_ms`` in the
    engine queue, 1 ms before, except the first half's last ``p0_caught_first``, already caught by the rising
    load; the last ``p0_drops_second`` of the second half refused with 429) and ``p2_first`` / ``p2_second`` P2
    requests spread over the halves."""
    spans: list[SpanSpec] = []
    number = 0
    for half, p2 in ((0, p2_first), (1, p2_second)):
        for i in range(p0_per_half):
            dropped = half == 1 and i >= p0_per_half - p0_drops_second
            extra = {"http.response.status_code": "429"} if dropped else {}
            queue = p0_queue_second_ms if half or i >= p0_per_half - p0_caught_first else 1.0
            spans += tiered_request(number, half * TIER_HALF_MS + i * 960.0 / p0_per_half, "P0", queue, extra)
            number += 1
        for i in range(p2):
            spans += tiered_request(number, half * TIER_HALF_MS + i * TIER_HALF_MS / p2 + 7.0, "P2", 1.0, {})
            number += 1
    return spans


def tier_burst(p0_queue_alongside_ms: float, p0_burst: int = 0) -> list[SpanSpec]:
    """Four seconds of P0 requests, one every 120 ms, and a short P2 flood in the first second: twelve P2
    requests from 600 ms waiting 400 ms each (and ``p0_burst`` more P0 requests among them: every tier bursting
    together). The P0 requests started while the flood is in flight wait ``p0_queue_alongside_ms``, the others
    1 ms: the flood sits in the first half of the P0 requests' time."""
    spans: list[SpanSpec] = []
    for number in range(12):
        spans += tiered_request(number, 600.0 + number * 10.0, "P2", 400.0, {})
    for number in range(p0_burst):
        spans += tiered_request(100 + number, 605.0 + number * 10.0, "P0", p0_queue_alongside_ms, {})
    for i in range(34):
        start = i * 120.0
        queue = p0_queue_alongside_ms if 620.0 <= start < 1_000.0 else 1.0
        spans += tiered_request(12 + i, start, "P0", queue, {})
    return spans


def small_tier_surges(cycles: int = 4) -> list[SpanSpec]:
    """Every 3.5 s, three P2 requests (1 s each) within 10 ms, then a P0 request and a P1 request that waits 900 ms
    behind them, then two lone P1 requests 1.1 s apart (1 ms of queue): within the P2 tier's holding time each slow
    P1 request met 3 P2 arrivals and one other (the P0 request) besides itself, each lone one none and itself."""
    spans: list[SpanSpec] = []
    number = 0
    for cycle in range(cycles):
        start = cycle * 3_500.0
        requests = [(start + k * 5.0, "P2", 950.0) for k in range(3)]
        requests += [(start + 15.0, "P0", 50.0), (start + 20.0, "P1", 900.0)]
        requests += [(start + 1_300.0 + k * 1_100.0, "P1", 1.0) for k in range(2)]
        for at, tier, queue_ms in requests:
            spans += tiered_request(number, at, tier, queue_ms, {})
            number += 1
    return spans


CAPTURED = Path(__file__).parent / "captured"
"""Request timings captured from served runs of the instrumented stack (each file's test says which)."""
REQUEST_BASE_MS = 55.0
"""About what :func:`tiered_request` takes besides its queue wait, ms."""


def captured_tier_requests(name: str) -> list[SpanSpec]:
    """The requests of ``CAPTURED / name`` (CSV: tier, start_ms, latency_ms, dropped) as :func:`tiered_request`
    traces taking about their captured latency (the rest of it waiting in the engine queue), the dropped ones
    refused with 429."""
    spans: list[SpanSpec] = []
    with (CAPTURED / name).open() as rows:
        for number, row in enumerate(csv.DictReader(rows)):
            queue_ms = max(0.2, float(row["latency_ms"]) - REQUEST_BASE_MS)
            extra = {"http.response.status_code": "429"} if row["dropped"] == "true" else {}
            spans += tiered_request(number, float(row["start_ms"]), row["tier"], queue_ms, extra)
    return spans
