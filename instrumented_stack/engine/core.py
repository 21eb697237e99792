"""The engine core interface: what the HTTP front end asks of a time model or scheduler.

The front end (``engine.app``) turns an OpenAI-compatible request into an :class:`EngineRequest`, awaits
:meth:`EngineCore.generate`, and builds vLLM's ``llm_request`` span from the returned
:class:`RequestTimeline`. :class:`~instrumented_stack.engine.batching_core.BatchingEngineCore` fills the
timeline from a model of vLLM v1's scheduler (continuous batching, KV blocks, prefix cache, preemption).

Timestamps follow vLLM v1's per-request stats (``vllm/v1/metrics/stats.py`` ``RequestStateStats``:
``arrival_time``, ``queued_ts``, ``scheduled_ts``, ``first_token_ts``, ``last_token_ts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

FinishReason = Literal["stop", "length", "abort"]
"""vLLM v1 ``FinishReason`` as it prints (``str(FinishReason.LENGTH) == "length"``)."""


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A tokenized request handed to the engine core.

    Attributes:
        request_id: the engine-side id (vLLM's ``external_req_id``, e.g. ``cmpl-<hex>-0``).
        prompt_tokens: prompt length in tokens (>= 1).
        prompt_token_ids: the prompt's token ids when known (``len == prompt_tokens``); the prefix cache
            hashes them in KV blocks. Empty: the prompt cannot be matched in the prefix cache.
        max_tokens: most tokens to generate (>= 1).
        ignore_eos: keep generating past EOS until ``max_tokens`` (vLLM's sampling parameter).
        eos_after: the emulated model samples EOS after this many tokens (finish reason ``stop``) unless
            ``max_tokens`` comes first or ``ignore_eos`` is set; ``None``: it never does (``length``).
        temperature, top_p: sampling parameters, reported on the span only.
        n: number of sequences requested (the emulator serves 1).
    """

    request_id: str
    prompt_tokens: int
    max_tokens: int
    prompt_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    eos_after: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1

    @property
    def output_tokens(self) -> int:
        """Tokens this request generates: ``max_tokens``, or fewer when the emulated EOS comes first."""
        if self.eos_after is None or self.ignore_eos:
            return self.max_tokens
        return min(self.max_tokens, max(self.eos_after, 1))


@dataclass(frozen=True, slots=True)
class RequestTimeline:
    """When a request passed each point, on the monotonic clock, in **seconds**.

    ``arrival_unix_ns`` anchors ``arrival_s`` to the wall clock (**nanoseconds** since the Unix epoch),
    so span timestamps come out as ``arrival_unix_ns + (t - arrival_s) * 1e9``.
    Invariant: ``arrival_s <= queued_s <= scheduled_s <= first_token_s <= last_token_s <= finished_s``.
    """

    arrival_unix_ns: int
    arrival_s: float
    queued_s: float
    scheduled_s: float
    first_token_s: float
    last_token_s: float
    finished_s: float

    def unix_ns(self, t_s: float) -> int:
        """Wall-clock **nanoseconds** since the Unix epoch of monotonic instant ``t_s`` (seconds)."""
        return self.arrival_unix_ns + round((t_s - self.arrival_s) * 1e9)


@dataclass(frozen=True, slots=True)
class EngineResult:
    """Outcome of one request.

    Attributes:
        timeline: when the request was queued, scheduled, produced tokens and finished.
        completion_tokens: tokens generated (vLLM's ``num_generation_tokens``).
        finish_reason: why generation stopped.
        cached_tokens: prompt tokens found in the prefix cache when the request was first scheduled (vLLM's
            ``num_cached_tokens``, which its OpenAI server reports as ``prompt_tokens_details.cached_tokens``).
    """

    timeline: RequestTimeline
    completion_tokens: int
    finish_reason: FinishReason
    cached_tokens: int = 0


TokenListener = Callable[[int, int], None]
"""Told the number of output tokens generated so far and the prompt tokens the prefix cache served (known once
the request was scheduled; vLLM's ``num_cached_tokens``), at the end of each engine step that sampled one for its
request (on the engine's event loop; it must not block)."""


class EngineCore(Protocol):
    """Serves requests; implementations are used from one asyncio event loop."""

    async def generate(self, request: EngineRequest, on_token: TokenListener | None = None) -> EngineResult:
        """Queue, schedule and run ``request``; return when its last token is out.

        ``on_token`` hears of every step that sampled a token for ``request`` (streaming responses).

        Cancelling the awaiting task aborts the request and frees whatever it held.
        """
        ...

    async def aclose(self) -> None:
        """Stop background work; pending requests are cancelled. Idempotent."""
        ...
