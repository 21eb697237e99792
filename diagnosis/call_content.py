"""What instrumentations capture of a call's content, read into one comparable value per call: a model call's
input (when content capture is on) and a tool call's name and arguments. For telling calls apart, never shown.

Sources, the first present wins where several keys carry the same fact:

- OpenTelemetry GenAI semantic conventions: ``gen_ai.input.messages`` and ``gen_ai.system_instructions``
  (JSON), the deprecated ``gen_ai.prompt`` and indexed ``gen_ai.prompt.<n>.*`` (OpenLLMetry, older
  instrumentations); tools ``gen_ai.tool.name`` and ``gen_ai.tool.call.arguments`` (Jaeger UI's GenAI
  fixture writes ``gen_ai.tool.input``).
- OpenInference: indexed ``llm.input_messages.<n>.message.*`` and ``input.value`` (the request); on ``TOOL``
  spans ``tool.name`` and ``input.value`` (the arguments; ``tool.parameters`` is the schema, not the call).
- OpenLLMetry / Traceloop: ``traceloop.entity.name`` and ``traceloop.entity.input`` on ``tool`` spans.
- Vercel AI SDK: ``ai.prompt.messages``, ``ai.prompt``; ``ai.toolCall.name``, ``ai.toolCall.args``.
- Langfuse SDK v3: ``langfuse.observation.input``.
- Google ADK: ``gcp.vertex.agent.tool_call_args``.
"""

from __future__ import annotations

import polars as pl

from analysis.spans import attribute

INPUT_KEYS = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.prompt",
    "ai.prompt.messages",
    "ai.prompt",
    "langfuse.observation.input",
    "input.value",
)
"""Attributes holding a model call's captured input, all of which are part of it when present."""
INPUT_PREFIXES = ("llm.input_messages.", "gen_ai.prompt.")
"""Prefixes of indexed attributes that together hold a model call's captured input."""
TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", "ai.toolCall.name", "traceloop.entity.name")
"""A tool call's tool name, before the span name."""
TOOL_ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.input",
    "ai.toolCall.args",
    "gcp.vertex.agent.tool_call_args",
    "traceloop.entity.input",
    "langfuse.observation.input",
    "input.value",
)
"""A tool call's arguments as the instrumentation wrote them (JSON text, mostly)."""
_SEPARATOR = "\x1f"


def input_content() -> pl.Expr:
    """Over a frame with ``attributes`` (Map): a model call's captured input as one String (every
    :data:`INPUT_KEYS` value and every :data:`INPUT_PREFIXES` attribute, key and value, in key order), null
    when the call's content was not captured."""
    pairs = (
        pl.col("attributes")
        .map.entries()
        .list.eval(pl.concat_str(pl.element().struct.field("key"), pl.lit("="), pl.element().struct.field("value")))
    )
    indexed = pairs.list.eval(
        pl.element().filter(pl.any_horizontal(pl.element().str.starts_with(prefix) for prefix in INPUT_PREFIXES)).sort()
    ).list.join(_SEPARATOR)
    parts = [*(attribute(key) for key in INPUT_KEYS), pl.when(indexed != "").then(indexed)]
    return (
        pl.when(pl.any_horizontal(part.is_not_null() for part in parts))
        .then(pl.concat_str(parts, separator=_SEPARATOR, ignore_nulls=True))
        .alias("input_content")
    )


def tool_call_signature() -> pl.Expr:
    """Over a span frame (``name``, ``attributes``): a tool call's name and arguments as one String, null when
    the arguments were not captured (two such calls cannot be told equal)."""
    name = pl.coalesce(*(attribute(key) for key in TOOL_NAME_KEYS), pl.col("name"))
    arguments = pl.coalesce(*(attribute(key) for key in TOOL_ARGUMENT_KEYS))
    return pl.concat_str([name, arguments], separator=_SEPARATOR).alias("tool_call_signature")
