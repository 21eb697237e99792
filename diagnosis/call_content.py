"""What instrumentations capture of a call's content, read into one comparable value per call: a model call's
input and output (when content capture is on) and a tool call's name and arguments. For telling calls apart and
for seeing whether one call's answer went into the next, never shown.

Sources, the first present wins where several keys carry the same fact:

- OpenTelemetry GenAI semantic conventions: ``gen_ai.input.messages`` and ``gen_ai.system_instructions``
  (JSON), ``gen_ai.output.messages``, the deprecated ``gen_ai.prompt`` / ``gen_ai.completion`` and indexed
  ``gen_ai.prompt.<n>.*`` / ``gen_ai.completion.<n>.*`` (OpenLLMetry, older instrumentations); tools
  ``gen_ai.tool.name`` and ``gen_ai.tool.call.arguments`` (Jaeger UI's GenAI fixture writes
  ``gen_ai.tool.input``).
- OpenInference: indexed ``llm.input_messages.<n>.message.*`` / ``llm.output_messages.<n>.message.*``,
  ``input.value`` / ``output.value``; on ``TOOL`` spans ``tool.name`` and ``input.value`` (the arguments;
  ``tool.parameters`` is the schema, not the call).
- OpenLLMetry / Traceloop: ``traceloop.entity.name`` and ``traceloop.entity.input`` on ``tool`` spans.
- Vercel AI SDK: ``ai.prompt.messages``, ``ai.prompt``, ``ai.response.text``; ``ai.toolCall.name``,
  ``ai.toolCall.args``.
- Langfuse SDK v3: ``langfuse.observation.input`` / ``langfuse.observation.output``.
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
OUTPUT_KEYS = (
    "gen_ai.output.messages",
    "gen_ai.completion",
    "ai.response.text",
    "langfuse.observation.output",
    "output.value",
)
"""Attributes holding a model call's captured output."""
OUTPUT_PREFIXES = ("llm.output_messages.", "gen_ai.completion.")
"""Prefixes of indexed attributes that together hold a model call's captured output."""
PROBE_PATTERN = r"[A-Za-z0-9 ,.'-]{20,}"
"""A run of plain characters, which JSON encodes as they are: found in the output, it is found verbatim in any
later input that quotes the output."""
PROBE_CHARS = 40
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
    return _captured(INPUT_KEYS, INPUT_PREFIXES).alias("input_content")


def output_probe() -> pl.Expr:
    """Over a frame with ``attributes`` (Map): a piece of a model call's captured output that a later input
    quoting the output must contain verbatim (the first run of :data:`PROBE_PATTERN`, at most
    :data:`PROBE_CHARS` characters), null when the output was not captured or has no such run (a tool call's
    short arguments)."""
    return (
        _captured(OUTPUT_KEYS, OUTPUT_PREFIXES, indexed_keys=False)
        .str.extract(f"({PROBE_PATTERN})")
        .str.slice(0, PROBE_CHARS)
        .alias("output_probe")
    )


def _captured(keys: tuple[str, ...], prefixes: tuple[str, ...], *, indexed_keys: bool = True) -> pl.Expr:
    """Every ``keys`` value and every attribute under ``prefixes`` (``key=value`` in key order, or only the
    values in stored order when not ``indexed_keys``) joined, or null when there is none."""
    entries = pl.col("attributes").map.entries()
    under = pl.any_horizontal(pl.element().struct.field("key").str.starts_with(prefix) for prefix in prefixes)
    if indexed_keys:
        pairs = pl.concat_str(pl.element().struct.field("key"), pl.lit("="), pl.element().struct.field("value"))
        indexed = entries.list.eval(pairs.filter(under).sort())
    else:
        indexed = entries.list.eval(pl.element().struct.field("value").filter(under))
    joined = indexed.list.join(_SEPARATOR)
    parts = [*(attribute(key) for key in keys), pl.when(joined != "").then(joined)]
    return pl.when(pl.any_horizontal(part.is_not_null() for part in parts)).then(
        pl.concat_str(parts, separator=_SEPARATOR, ignore_nulls=True)
    )


def tool_call_signature() -> pl.Expr:
    """Over a span frame (``name``, ``attributes``): a tool call's name and arguments as one String, null when
    the arguments were not captured (two such calls cannot be told equal)."""
    name = pl.coalesce(*(attribute(key) for key in TOOL_NAME_KEYS), pl.col("name"))
    arguments = pl.coalesce(*(attribute(key) for key in TOOL_ARGUMENT_KEYS))
    return pl.concat_str([name, arguments], separator=_SEPARATOR).alias("tool_call_signature")
