"""A deliberately simple engine core: bounded concurrency plus a linear time model.

- **Queue**: at most ``max_num_seqs`` requests run at once (an ``asyncio.Semaphore``, named after vLLM's
  ``--max-num-seqs``); the rest wait in FIFO order, and that wait is ``time_in_queue``.
- **Prefill**: ``prompt_tokens * prefill_s_per_token``; it produces the first token (as in vLLM, where
  the step that finishes the prompt samples token 1).
- **Decode**: ``(completion_tokens - 1) * decode_s_per_token``.
- **Speed**: every modeled duration is divided by ``speed`` before the core sleeps, so a demo at
  ``speed=20`` runs 20 times faster with the same shape. Timelines hold the times actually spent, so
  spans, attributes and client-side latencies agree with each other.

The emulator has no language model and never samples EOS: every request runs to ``max_tokens`` and
finishes with reason ``length``. Batch effects (decode slowing down as the batch grows, chunked prefill,
KV capacity, prefix caching, preemption) are issue 4's scheduler emulator, which replaces this core.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.engine.core import EngineRequest, EngineResult, RequestTimeline


class SimpleTimeModel(BaseModel):
    """Linear per-request costs, in **seconds** of modeled time.

    Defaults are in the range of an 8B model on one datacenter GPU: 10k prompt tokens/s of prefill,
    20 ms per decoded token.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefill_s_per_token: float = Field(default=1e-4, ge=0, description="prefill seconds per prompt token")
    decode_s_per_token: float = Field(default=0.02, ge=0, description="decode seconds per output token")
    speed: float = Field(default=1.0, gt=0, description="wall-clock speed-up: modeled seconds / speed")

    def prefill_s(self, prompt_tokens: int) -> float:
        """Wall-clock **seconds** to prefill ``prompt_tokens`` tokens and sample the first output token."""
        return prompt_tokens * self.prefill_s_per_token / self.speed

    def decode_s(self, completion_tokens: int) -> float:
        """Wall-clock **seconds** to decode tokens 2..``completion_tokens`` (0 for a single token)."""
        return max(completion_tokens - 1, 0) * self.decode_s_per_token / self.speed


class SimpleEngineCore:
    """:class:`~instrumented_stack.engine.core.EngineCore` over :class:`SimpleTimeModel`.

    Use from one asyncio event loop (the engine app's). ``max_num_seqs`` must be >= 1.
    """

    def __init__(self, time_model: SimpleTimeModel, max_num_seqs: int) -> None:
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self._time_model = time_model
        self._running_slots = asyncio.Semaphore(max_num_seqs)

    async def generate(self, request: EngineRequest) -> EngineResult:
        """Wait for a running slot, then sleep through prefill and decode; see the module docstring."""
        arrival_unix_ns = time.time_ns()
        arrival_s = time.monotonic()
        completion_tokens = request.max_tokens
        async with self._running_slots:
            scheduled_s = time.monotonic()
            await asyncio.sleep(self._time_model.prefill_s(request.prompt_tokens))
            first_token_s = time.monotonic()
            await asyncio.sleep(self._time_model.decode_s(completion_tokens))
            last_token_s = time.monotonic()
        timeline = RequestTimeline(
            arrival_unix_ns=arrival_unix_ns,
            arrival_s=arrival_s,
            queued_s=arrival_s,
            scheduled_s=scheduled_s,
            first_token_s=first_token_s,
            last_token_s=last_token_s,
            finished_s=last_token_s,
        )
        return EngineResult(timeline=timeline, completion_tokens=completion_tokens, finish_reason="length")
