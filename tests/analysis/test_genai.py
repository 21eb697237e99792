"""First-token instants read from the attributes instrumentations write (analysis.genai), unit by unit."""

from __future__ import annotations

import pytest
from analysis_support import T0, S, frame

from analysis.genai import first_token_ns
from units import NS_PER_MS as MS


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gen_ai.response.time_to_first_chunk", "0.04"),  # GenAI semconv, seconds
        ("gen_ai.client.operation.time_to_first_chunk", "0.04"),  # pydantic-ai, seconds
        ("ai.response.msToFirstChunk", "40"),  # Vercel AI SDK doStream, ms
        ("ai.stream.msToFirstChunk", "40"),  # Vercel AI SDK streamObject, ms
        # Strands Agents' model span (strands/telemetry/tracer.py: the event loop's timeToFirstByteMs), ms: read
        # as seconds, 40 would put the first token 40 s after the start, clipped to the span's end.
        ("gen_ai.server.time_to_first_token", "40"),
        ("ttft_ms", "40"),  # Claude Code's claude_code.llm_request, ms
    ],
)
def test_first_token_delay_is_read_in_its_convention_unit(key: str, value: str) -> None:
    spans = frame([S("chat", "", 0, 200 * MS, name="chat", kind="Client", attributes={key: value})])
    assert first_token_ns(spans).to_list() == [T0 + 40 * MS]
