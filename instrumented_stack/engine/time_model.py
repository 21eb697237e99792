"""How long one engine step takes, from what the step computes.

A vLLM v1 step runs one forward pass over a mixed batch: prefill chunks (new prompt tokens) and one decode
token per decoding request. The cost model is the usual roofline shape:

- a fixed ``step_overhead_s`` per step (reading the weights once, launch overhead);
- prefill: ``prefill_s_per_token`` per *computed* prompt token, so prefix-cache hits cost nothing;
- decode: ``decode_s_per_seq`` per decoding request (the batch size) plus ``decode_s_per_kv_token`` per
  KV token those requests attend over (the resident context), which is what makes a decode step slower as
  the batch and the contexts grow.

Defaults are in the range of an 8B model on one datacenter GPU. All costs are **seconds** of modeled time;
the engine divides by ``speed`` before sleeping, so demos keep the shape and run faster.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StepTimeModel(BaseModel):
    """Modeled cost of one engine step, in **seconds**; ``speed`` turns it into wall-clock time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_overhead_s: float = Field(default=0.006, ge=0, description="fixed seconds per step")
    prefill_s_per_token: float = Field(default=6e-5, ge=0, description="seconds per computed prompt token")
    decode_s_per_seq: float = Field(default=2.5e-4, ge=0, description="seconds per decoding request in the step")
    decode_s_per_kv_token: float = Field(
        default=4e-8, ge=0, description="seconds per resident KV token of the decoding requests"
    )
    speed: float = Field(default=1.0, gt=0, description="wall-clock speed-up: modeled seconds / speed")

    def step_s(self, prefill_tokens: int, decode_seqs: int, decode_kv_tokens: int) -> float:
        """Modeled **seconds** of a step computing ``prefill_tokens`` prompt tokens and ``decode_seqs``
        decode tokens over ``decode_kv_tokens`` resident KV tokens (0 for an empty step)."""
        if prefill_tokens == 0 and decode_seqs == 0:
            return 0.0
        return (
            self.step_overhead_s
            + prefill_tokens * self.prefill_s_per_token
            + decode_seqs * self.decode_s_per_seq
            + decode_kv_tokens * self.decode_s_per_kv_token
        )

    def wall_s(self, modeled_s: float) -> float:
        """Wall-clock **seconds** for ``modeled_s`` modeled seconds."""
        return modeled_s / self.speed
