"""Provider throttling in front of the emulated engine: a seeded fraction of requests answered 429 or 503.

Hosted LLM APIs shed load with ``429 Too Many Requests`` (rate limits) or ``503 Service Unavailable``
(overload), with ``Retry-After``; the OpenAI Python SDK retries both (``max_retries``, default 2) and honours
``retry-after-ms`` before ``Retry-After``. A throttled request never reaches the engine, so it has no
``llm_request`` span, as a request a provider's gateway refuses never reaches the model server.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ThrottleConfig(BaseModel):
    """Which requests the emulator refuses (``fraction`` 0 refuses none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction: float = Field(default=0.0, ge=0, le=1, description="share of requests refused")
    status: Literal[429, 503] = Field(default=429, description="429 rate limited or 503 overloaded")
    retry_after_s: float = Field(
        default=0.05, ge=0, description="seconds the client should wait (Retry-After rounded up, retry-after-ms exact)"
    )
    seed: int = Field(default=0, description="seed of the refusal draws, one per request in arrival order")


class Throttle:
    """Draws, per request in arrival order, whether to refuse it; the same seed refuses the same requests.

    One per server; not thread-safe (the server's event loop owns it).
    """

    def __init__(self, config: ThrottleConfig) -> None:
        self.config = config
        self._random = random.Random(config.seed)

    def refuse(self) -> bool:
        """Whether the next request is refused (always a draw, so the sequence does not depend on ``fraction``)."""
        return self._random.random() < self.config.fraction

    def headers(self) -> dict[str, str]:
        """``Retry-After`` (whole seconds, rounded up, as RFC 9110 asks) and OpenAI's ``retry-after-ms``."""
        seconds = self.config.retry_after_s
        return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(round(seconds * 1000))}
