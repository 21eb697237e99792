"""What the emulated model answers when a chat request offers tools: which tool it calls, with what arguments.

The emulator has no model, so the choice is a fixed, documented rule (project rule, made for agent loops that
must end): after the last ``user`` message, the model calls each offered function tool once, in the order the
request lists them, one call per answer; once every offered tool has been called (or when ``tool_choice`` is
``"none"``) it answers with text. A ``tool_choice`` naming a function narrows the offer to that function. So
an agent offered two tools makes three LLM calls per user turn: tool A, tool B, text.

Arguments are the smallest JSON value valid for the tool's ``parameters`` JSON Schema
(:func:`minimal_arguments`), so SDKs and agent frameworks that validate arguments (pydantic-ai, the OpenAI
Agents SDK's strict schemas, LangChain's tool parsing) accept them. One exception makes an agent asked about a trace
pass it on: a string property named ``trace_id`` or ``trace_id_<suffix>`` takes the first trace ID (32 hex digits,
W3C trace context) in the last ``user`` message, when it has one (``"why is trace 4bf9...36 slow?"`` makes a
tool's ``trace_id`` that ID instead of ``"example"``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

JsonSchema = Mapping[str, Any]

_EXAMPLE_STRING = "example"
_TRACE_ID = re.compile(r"\b[0-9a-fA-F]{32}\b")
_TRACE_ID_PROPERTY = re.compile(r"trace_id(_\w+)?")


@dataclass(frozen=True, slots=True)
class PlannedToolCall:
    """The tool call the emulated model answers with: function ``name`` and its ``arguments`` (a JSON text)."""

    name: str
    arguments: str


def called_tool_names(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the functions called by ``assistant`` messages after the last ``user`` message, in order.

    ``messages`` are OpenAI chat messages as plain mappings (``role``, ``tool_calls`` of
    ``{"function": {"name"}}``).
    """
    last_user = max((i for i, message in enumerate(messages) if message.get("role") == "user"), default=-1)
    names: list[str] = []
    for message in messages[last_user + 1 :]:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            names.append(str(call.get("function", {}).get("name", "")))
    return names


def plan_tool_call(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], tool_choice: object
) -> PlannedToolCall | None:
    """The call the emulated model answers with next, or ``None`` to answer with text.

    Args:
        messages: the request's chat messages (plain mappings).
        tools: the request's ``tools`` entries (``{"type": "function", "function": {"name", "parameters"}}``).
        tool_choice: the request's ``tool_choice``: ``None``, ``"auto"``, ``"required"``, ``"none"``, or
            ``{"type": "function", "function": {"name": ...}}``.
    """
    if tool_choice == "none":
        return None
    offered = [tool["function"] for tool in tools if tool.get("type", "function") == "function"]
    if isinstance(tool_choice, Mapping):
        forced = tool_choice.get("function", {}).get("name")
        offered = [function for function in offered if function["name"] == forced]
    called = set(called_tool_names(messages))
    found = _TRACE_ID.search(_last_user_text(messages))
    for function in offered:
        if function["name"] not in called:
            arguments = minimal_arguments(function.get("parameters"), found.group().lower() if found else None)
            return PlannedToolCall(str(function["name"]), json.dumps(arguments, separators=(",", ":")))
    return None


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last ``user`` message (``content`` a string or text parts), ``""`` when there is none."""
    content = next((message.get("content") for message in reversed(messages) if message.get("role") == "user"), "")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or () if isinstance(part, Mapping))


def minimal_arguments(schema: JsonSchema | None, trace_id: str | None = None) -> object:
    """The smallest JSON value valid for ``schema`` (a JSON Schema as OpenAI tool ``parameters`` use it).

    Objects get exactly their ``required`` properties (a free string one named ``trace_id`` or
    ``trace_id_<suffix>`` is ``trace_id``, when given); arrays ``max(minItems, 1)`` items (at most ``maxItems``);
    strings ``"example"`` cut or padded to ``maxLength``/``minLength``; numbers their lower bound or 1;
    ``enum``/``const`` their first value; ``anyOf``/``oneOf``/``allOf`` their first branch; local ``$ref``
    (``#/$defs/...``, ``#/definitions/...``) is followed. A missing or empty schema gives ``{}``.
    """
    return _value(schema or {"type": "object"}, schema or {}, trace_id)


def _resolve(schema: JsonSchema, root: JsonSchema) -> JsonSchema:
    while "$ref" in schema:
        node: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _value(schema: JsonSchema, root: JsonSchema, trace_id: str | None) -> object:
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return _value(schema[combinator][0], root, trace_id)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _property(name, properties.get(name, {}), root, trace_id) for name in schema.get("required", ())}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [_value(schema.get("items", {}), root, trace_id) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = _EXAMPLE_STRING[: int(schema.get("maxLength", len(_EXAMPLE_STRING)))]
    return text.ljust(int(schema.get("minLength", 0)), "x")


def _property(name: str, schema: JsonSchema, root: JsonSchema, trace_id: str | None) -> object:
    """An object's property: ``trace_id`` for a free string one (no ``enum`` or ``const``) its name marks as a trace
    ID, else the minimal value."""
    value = _value(schema, root, trace_id)
    free = not {"enum", "const"} & set(_resolve(schema, root))
    if trace_id is not None and isinstance(value, str) and free and _TRACE_ID_PROPERTY.fullmatch(name):
        return trace_id
    return value


def _number(schema: JsonSchema, *, integer: bool) -> int | float:
    step = 1 if integer else 0.5
    value: float = schema.get("minimum", 1)
    if "exclusiveMinimum" in schema:
        value = schema["exclusiveMinimum"] + step
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema:
        value = min(value, schema["exclusiveMaximum"] - step)
    return int(value) if integer else float(value)
