"""Stored history for the anomaly detector's tests: steady minutes of agent requests, one minute of queue saturation
(or of megabyte tool responses that cost no latency), steady minutes again (:mod:`diagnosis_support`'s requests),
laid on whole minutes; and the detector's settings for it (shorter baselines, smaller minimum counts than the
defaults: 24 requests a minute)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import numpy as np
from diagnosis_cases import is_tool_client
from diagnosis_support import T0, Chat, Request, SpanSpec, build_all

from query.anomaly import MINUTE_NS, AnomalySettings

STEADY_MINUTES = 8
FAULT_MINUTE = STEADY_MINUTES
RECOVERY_MINUTES = 2
MINUTES = FAULT_MINUTE + 1 + RECOVERY_MINUTES
PER_MINUTE = 24
BASE = (T0 // MINUTE_NS + 1) * MINUTE_NS
"""Start of the first minute (whole minutes, as the rollups are)."""
SETTINGS = AnomalySettings(
    window_minutes=1, baseline_minutes=10, min_baseline_minutes=5, settle_s=0, min_calls=10, min_minute_calls=5
)


STALL = 15.0
"""How much slower a stalled request's tool and engine times are (a host stall of a few hundred ms)."""


def steady(minute: int, rng: np.random.Generator, stalled: Collection[int] = ()) -> list[SpanSpec]:
    """Requests spread over the minute, tool and engine times jittered by a few ms; the requests numbered in
    ``stalled`` :data:`STALL` times slower (one host stall, not a fault)."""
    return build_all(
        Request(
            trace=minute * 1000 + i,
            start_ms=(BASE - T0) / 1e6 + minute * 60_000 + i * 2_400,
            tool_ms=float(rng.normal(20.0, 2.0)) * (STALL if i in stalled else 1.0),
            chats=(
                Chat(
                    prompt=f"q {minute} {i}",
                    decode_ms=float(rng.normal(20.0, 2.0)) * (STALL if i in stalled else 1.0),
                    prefill_ms=float(rng.normal(8.0, 1.0)),
                ),
            ),
        )
        for i in range(PER_MINUTE)
    )


def saturated(minute: int) -> list[SpanSpec]:
    """Two bursts of twelve requests 20 ms apart, each waiting 25 ms more in the engine's queue than the one
    before (``diagnosis_cases.queue_saturation``'s shape)."""
    return build_all(
        Request(
            trace=minute * 1000 + burst * 100 + i,
            start_ms=(BASE - T0) / 1e6 + minute * 60_000 + burst * 30_000 + i * 20.0,
            chats=(Chat(prompt=f"queued {minute} {burst} {i}", queue_ms=25.0 * (i + 1)),),
        )
        for burst in range(2)
        for i in range(12)
    )


PAYLOAD_BYTES = 1_800_000
"""A tool response body of the oversized minute: the brief's 1.8 MB, uncompressed."""


def uncompressed(spans: list[SpanSpec]) -> list[SpanSpec]:
    """``spans`` with every tool call answering a :data:`PAYLOAD_BYTES` body without compression, timed as
    before: a fault no latency series shows."""
    body = {"http.response.body.size": str(PAYLOAD_BYTES)}
    return [replace(span, attributes={**span.attributes, **body}) if is_tool_client(span) else span for span in spans]


def as_root(spans: list[SpanSpec], root: int, traces: int) -> list[SpanSpec]:
    """``spans`` as the requests of a stack of its own: every service named ``<service>-NNN`` (``root``), trace
    numbers moved by ``traces``. Many of them are a fleet of root services."""
    return [
        replace(span, trace_id=f"{int(span.trace_id, 16) + traces:032x}", service=f"{span.service}-{root:03d}")
        for span in spans
    ]


def history(
    seed: int = 11, *, stall: bool = False, payload: bool = False, second_fault: bool = False
) -> list[list[SpanSpec]]:
    """The spans of every minute, in order: :data:`STEADY_MINUTES` steady, the fault (with ``stall``: a steady
    minute two of whose requests stalled instead; with ``payload``: a steady minute made :func:`uncompressed`),
    :data:`RECOVERY_MINUTES` steady; with ``second_fault`` the first of those is the queue saturation again, made
    :func:`uncompressed` (a second fault while the first one's incident is open)."""
    rng = np.random.default_rng(seed)
    minutes = [steady(m, rng) for m in range(STEADY_MINUTES)]
    if stall:
        minutes.append(steady(FAULT_MINUTE, rng, stalled=(5, 17)))
    elif payload:
        minutes.append(uncompressed(steady(FAULT_MINUTE, rng)))
    else:
        minutes.append(saturated(FAULT_MINUTE))
    recovery = [steady(FAULT_MINUTE + 1 + m, rng) for m in range(RECOVERY_MINUTES)]
    if second_fault:
        recovery[0] = uncompressed(saturated(FAULT_MINUTE + 1))
    return minutes + recovery


def at_end_of(minute: int) -> int:
    """The clock at the end of ``minute``: when the detector judges it (settle 0)."""
    return BASE + (minute + 1) * MINUTE_NS
