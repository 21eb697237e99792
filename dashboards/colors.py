"""Colours: one per service, the same on every page and every load; one per stage, from a palette of its own.

A service's colour is a hash of its name into :data:`SERVICE_PALETTE` (BLAKE2b, so every process and release
agrees), not its order of appearance, so a service keeps its colour from trace to trace. Services wear medium,
slightly muted tones; stages wear strong ones (warm for the model's time, cool for the application's), so a
stage piece drawn inside a service's bar stands out, and red stays for errors alone.
"""

from __future__ import annotations

import hashlib

from analysis import STAGES

SERVICE_PALETTE = (
    "#6f9bd1",
    "#e8a25c",
    "#7cbf74",
    "#b59ad4",
    "#5fb8b1",
    "#d9c257",
    "#b89478",
    "#e99bb8",
    "#8a93d9",
    "#9ccf6e",
    "#6fb3d9",
    "#d6a3d0",
    "#a7b86a",
    "#d9a38a",
    "#7ec9a0",
    "#9fa7b8",
)
"""Service colours (no red: red means an error)."""

STAGE_COLORS: dict[str, str] = dict(
    zip(
        STAGES,
        (
            "#5b6170",  # network
            "#0b8fa6",  # gateway
            "#2f4fbf",  # agent
            "#1e8a3e",  # retrieval
            "#7b3fb5",  # tool
            "#a0522d",  # llm.tokenize
            "#d62728",  # llm.queue: red on purpose, queueing is waste
            "#f07f0f",  # llm.prefill
            "#f2b705",  # llm.decode
            "#7a4a1e",  # llm.detokenize
            "#c2185b",  # llm.call: an untraced model call, whole
            "#e8590c",  # llm.first_token: waiting for an untraced call's first token
            "#f4a261",  # llm.stream: an untraced call streaming after its first token
            "#4c2a85",  # output_parsing
            "#b8bcc6",  # other
        ),
        strict=True,
    )
)
"""One colour per stage of :data:`analysis.STAGES`, shared by every page so a stage reads the same everywhere."""

STAGE_LABELS: dict[str, str] = {
    "network": "network",
    "gateway": "gateway",
    "agent": "agent (orchestration)",
    "retrieval": "retrieval",
    "tool": "tools",
    "llm.tokenize": "LLM tokenize",
    "llm.queue": "LLM queue",
    "llm.prefill": "LLM prefill",
    "llm.decode": "LLM decode",
    "llm.detokenize": "LLM detokenize",
    "llm.call": "LLM call (untraced inside)",
    "llm.first_token": "LLM until first token",
    "llm.stream": "LLM streaming",
    "output_parsing": "output parsing",
    "other": "other",
}
"""A stage's name for people."""

ERROR_COLOR = "#d62728"
NEUTRAL_COLOR = "#c8ccd4"
CRITICAL_COLOR = "#111827"
"""The critical path's colour (a dark line under the span's bar)."""


def service_color(service: str) -> str:
    """The colour of ``service``: the same for a name on every page, in every process."""
    digest = hashlib.blake2b(service.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return SERVICE_PALETTE[int.from_bytes(digest, "little") % len(SERVICE_PALETTE)]


def stage_label(stage: str) -> str:
    """A stage's name for people (the key itself for an unknown one)."""
    return STAGE_LABELS.get(stage, stage)
