"""A model call's messages as people read them, from whichever convention its instrumentation wrote them in.

Instrumentations record the conversation of a call in one of several shapes, all as span attributes or span event
attributes (stored as strings; structured values as their JSON):

- OpenTelemetry GenAI semantic conventions (``gen-ai-spans.md``, v1.37): ``gen_ai.system_instructions``,
  ``gen_ai.input.messages`` and ``gen_ai.output.messages``, JSON lists of ``{"role", "parts": [{"type": "text",
  "content"}, {"type": "tool_call", "name", "arguments"}, {"type": "tool_call_response", "response"}, ...]}``
  (LangGraph, Pydantic AI, OpenLLMetry, Semantic Kernel, the OpenAI v2 instrumentation write these).
- Their deprecated events (``gen-ai-events.md`` before v1.37): ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message`` (attribute ``content``) and ``gen_ai.choice`` (attribute
  ``message``); Strands writes their ``content`` in Bedrock Converse's shape (``[{"text"}, {"toolUse"}, ...]``).
- OpenLLMetry's older indexed attributes: ``gen_ai.prompt.<i>.role`` / ``.content`` / ``.tool_calls.<j>.name`` and
  ``gen_ai.completion.<i>.*``.
- OpenInference (``spec/semantic_conventions.md``): ``llm.input_messages.<i>.message.role`` / ``.content`` /
  ``.contents.<j>.message_content.text`` / ``.tool_calls.<j>.tool_call.function.name`` and ``.arguments``, and
  ``llm.output_messages.<i>.*``; ``input.value`` / ``output.value`` where no message is flattened.
- The Vercel AI SDK: ``ai.prompt.messages`` (chat-completion shaped ``{"role", "content"}`` list) or, on the
  outer call span, ``ai.prompt`` (``{"system", "prompt" | "messages"}``), ``ai.response.text`` and
  ``ai.response.toolCalls``.
- Prompt Flow's tracing events ``promptflow.function.inputs`` / ``promptflow.llm.generated_message`` (``payload``).
- Plain ``gen_ai.prompt`` / ``gen_ai.completion`` text (LangSmith's OTel export).

:data:`CONVENTIONS` lists them in the order they are tried; for each of the three directions (system, input,
output) the first convention that yields a message wins, so a span that carries both OpenInference's flattened
messages and its ``input.value`` shows the messages once. Text is cut at :data:`MAX_PART_CHARS` per part and the
list at :data:`MAX_MESSAGES`, with what was cut counted; sizes are the untruncated UTF-8 bytes.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Direction = Literal["system", "input", "output"]
PartKind = Literal["text", "tool_call", "tool_result", "reasoning", "other"]

MAX_PART_CHARS = 4_000
"""Characters of one part's text kept for display; the rest is counted in :attr:`MessagePart.cut_chars`."""
SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles whose message instructs the model (OpenAI's ``developer`` replaces ``system`` for its reasoning models)."""
MAX_MESSAGES = 50
"""Messages kept per span (a long chat history repeats in every call's input); the rest is counted."""


@dataclass(frozen=True)
class MessagePart:
    """One piece of a message: text, a tool call (``name`` and its arguments as ``text``), a tool's result,
    reasoning, or anything else (its JSON as ``text``)."""

    kind: PartKind
    text: str
    name: str = ""
    cut_chars: int = 0
    """Characters of ``text`` left out (:data:`MAX_PART_CHARS`)."""


@dataclass(frozen=True)
class Message:
    """One message of a model call: who said it, its parts, and its size in UTF-8 bytes before any cut."""

    direction: Direction
    role: str
    parts: tuple[MessagePart, ...]
    size_bytes: int
    convention: str
    """The convention it was read from (:attr:`Convention.name`)."""


@dataclass(frozen=True)
class SpanMessages:
    """A span's messages in order (system, input, output) and how many more were left out."""

    messages: tuple[Message, ...] = ()
    omitted: int = 0


Events = Sequence[tuple[str, Mapping[str, str]]]
Reader = Callable[[Mapping[str, str], Events], dict[Direction, list[Message]]]


@dataclass(frozen=True)
class Convention:
    """A way instrumentations write messages: its name and the reader that finds them on one span."""

    name: str
    read: Reader = field(repr=False)


def _cut(text: str) -> tuple[str, int]:
    return (text, 0) if len(text) <= MAX_PART_CHARS else (text[:MAX_PART_CHARS], len(text) - MAX_PART_CHARS)


def _part(kind: PartKind, text: object, name: object = "") -> MessagePart:
    shown, cut = _cut(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))
    return MessagePart(kind, shown, str(name or ""), cut)


def _message(direction: Direction, role: object, parts: list[MessagePart], convention: str) -> Message:
    size = sum(len(part.text.encode()) + part.cut_chars for part in parts)
    said_by = str(role or direction)
    return Message("system" if said_by in SYSTEM_ROLES else direction, said_by, tuple(parts), size, convention)


def _json(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value


_TEXT = ("content", "text")
_CALL = ("tool_call", ("arguments", "input", "args"), ("name", "toolName"))
_RESULT = ("tool_result", ("response", "result", "output"), ("toolName", "id"))
PART_TYPES: dict[str, tuple[PartKind, tuple[str, ...], tuple[str, ...]]] = {
    "text": ("text", _TEXT, ()),
    "input_text": ("text", _TEXT, ()),
    "output_text": ("text", _TEXT, ()),
    "reasoning": ("reasoning", _TEXT, ()),
    "tool_call": _CALL,
    "tool-call": _CALL,
    "function_call": _CALL,
    "tool_call_response": _RESULT,
    "tool-result": _RESULT,
    "function_call_output": _RESULT,
}
"""Typed content parts: GenAI semconv's ``parts`` (``text``, ``reasoning``, ``tool_call``,
``tool_call_response``), the OpenAI Responses API's (``input_text``, ``function_call`` ...) and the Vercel AI SDK's
(``tool-call``, ``tool-result``): their kind, the keys that may hold their text, and those that may hold a name."""


def _first(content: Mapping[str, object], keys: tuple[str, ...]) -> object:
    return next((content[key] for key in keys if key in content), "")


def _content_parts(content: object) -> list[MessagePart]:
    """A content value in any of the shapes the conventions use: a string, a GenAI part, an OpenAI / Vercel
    content block, a Bedrock Converse block, or a list of those."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        decoded = _json(content)
        return _content_parts(decoded) if isinstance(decoded, list | dict) else [_part("text", content)]
    if isinstance(content, list):
        return [part for item in content for part in _content_parts(item)]
    if not isinstance(content, dict):
        return [_part("text", str(content))]
    if (known := PART_TYPES.get(str(content.get("type")))) is not None:
        kind, text_keys, name_keys = known
        return [_part(kind, _first(content, text_keys), _first(content, name_keys))]
    if "text" in content and len(content) == 1:
        return [_part("text", content["text"])]
    if isinstance(use := content.get("toolUse"), dict):
        return _tool_call(use)
    if isinstance(result := content.get("toolResult"), dict):
        return [_part("tool_result", result.get("content", ""), result.get("toolUseId", ""))]
    if "role" in content and ("content" in content or "parts" in content or "tool_calls" in content):
        return _chat_parts(content)
    return [_part("other", content)]


def _chat_parts(message: Mapping[str, object]) -> list[MessagePart]:
    """A chat message's parts: GenAI ``parts``, or chat-completion ``content`` plus ``tool_calls``."""
    parts = _content_parts(message.get("parts", message.get("content")))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            parts += _tool_call(call.get("function") if isinstance(call.get("function"), dict) else call)
    return parts


def _tool_call(call: Mapping[str, object]) -> list[MessagePart]:
    """A tool call written without a part ``type`` (chat-completion ``function``, Bedrock ``toolUse``, the Vercel
    AI SDK's ``toolCalls``), read as the typed ``tool_call`` part of :data:`PART_TYPES`."""
    return _content_parts({**call, "type": "tool_call"})


def _chat_list(value: str | None, direction: Direction, convention: str) -> list[Message]:
    """A JSON list of chat messages (GenAI ``{"role", "parts"}`` or chat-completion ``{"role", "content"}``); a
    value that is not one is shown as one message of text."""
    if not value:
        return []
    decoded = _json(value)
    if not isinstance(decoded, list):
        return [_message(direction, direction, [_part("text", value)], convention)]
    return _chat_messages(decoded, direction, convention)


def _chat_messages(items: object, direction: Direction, convention: str) -> list[Message]:
    """Decoded chat messages (:func:`_chat_list`'s shapes); anything but a list of objects holds none."""
    if not isinstance(items, list):
        return []
    return [
        _message(direction, item.get("role"), _chat_parts(item), convention) for item in items if isinstance(item, dict)
    ]


def _semconv(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    name = "GenAI semantic conventions"
    found: dict[Direction, list[Message]] = {
        "input": _chat_list(attributes.get("gen_ai.input.messages"), "input", name),
        "output": _chat_list(attributes.get("gen_ai.output.messages"), "output", name),
    }
    if instructions := _content_parts(attributes.get("gen_ai.system_instructions")):
        found["system"] = [_message("system", "system", instructions, name)]
    return found


EVENT_ROLES: dict[str, tuple[Direction, str, str]] = {
    "gen_ai.system.message": ("system", "system", "content"),
    "gen_ai.user.message": ("input", "user", "content"),
    "gen_ai.assistant.message": ("input", "assistant", "content"),
    "gen_ai.tool.message": ("input", "tool", "content"),
    "gen_ai.choice": ("output", "assistant", "message"),
}
"""The deprecated GenAI events: their direction, role and the attribute that holds the content
(``gen-ai-events.md`` before v1.37)."""


def _semconv_events(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    found: dict[Direction, list[Message]] = defaultdict(list)
    for event_name, event_attributes in events:
        if (known := EVENT_ROLES.get(event_name)) is None:
            continue
        direction, role, key = known
        parts = _content_parts(event_attributes.get(key, event_attributes.get("content")))
        found[direction].append(
            _message(direction, event_attributes.get("role", role), parts, "GenAI semantic conventions (events)")
        )
    return found


_INDEXED = re.compile(r"^(?P<base>.+?)\.(?P<i>\d+)\.(?P<rest>.+)$")


def _indexed(attributes: Mapping[str, str], prefix: str) -> dict[int, dict[str, str]]:
    """Flattened attributes ``<prefix>.<i>.<rest>`` grouped by ``i``: ``{i: {rest: value}}``."""
    grouped: dict[int, dict[str, str]] = defaultdict(dict)
    for key, value in attributes.items():
        if key.startswith(prefix + ".") and (match := _INDEXED.match(key)) and match["base"] == prefix:
            grouped[int(match["i"])][match["rest"]] = value
    return grouped


def _flattened_calls(fields: Mapping[str, str], prefix: str, name_key: str, arguments_key: str) -> list[MessagePart]:
    return [
        _part("tool_call", call.get(arguments_key, ""), call.get(name_key, ""))
        for _, call in sorted(_indexed(fields, prefix).items())
    ]


def _openinference(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    name = "OpenInference"
    found: dict[Direction, list[Message]] = {}
    for direction, key in (("input", "llm.input_messages"), ("output", "llm.output_messages")):
        messages = []
        for _, fields in sorted(_indexed(attributes, key).items()):
            parts = _content_parts(fields.get("message.content"))
            for _, content in sorted(_indexed(fields, "message.contents").items()):
                if "message_content.text" in content:
                    parts.append(_part("text", content["message_content.text"]))
                if "tool_call.function.name" in content:
                    parts.append(
                        _part(
                            "tool_call",
                            content.get("tool_call.function.arguments", ""),
                            content["tool_call.function.name"],
                        )
                    )
            if not any(part.kind == "tool_call" for part in parts):
                # OpenInference's Anthropic instrumentation writes each call under both ``contents`` and
                # ``tool_calls``; show it once.
                parts += _flattened_calls(
                    fields, "message.tool_calls", "tool_call.function.name", "tool_call.function.arguments"
                )
            messages.append(_message(direction, fields.get("message.role"), parts, name))
        found[direction] = messages
    return found


def _openllmetry_indexed(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    name = "OpenLLMetry (indexed)"
    found: dict[Direction, list[Message]] = {}
    for direction, key in (("input", "gen_ai.prompt"), ("output", "gen_ai.completion")):
        found[direction] = [
            _message(
                direction,
                fields.get("role"),
                _content_parts(fields.get("content")) + _flattened_calls(fields, "tool_calls", "name", "arguments"),
                name,
            )
            for _, fields in sorted(_indexed(attributes, key).items())
        ]
    return found


def _vercel(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    name = "Vercel AI SDK"
    messages = _chat_list(attributes.get("ai.prompt.messages"), "input", name)
    prompt = _json(attributes.get("ai.prompt") or "{}")
    if not messages and isinstance(prompt, dict):
        # The outer ``ai.generateText`` span keeps the call's arguments: ``system`` and ``prompt`` or ``messages``.
        system = _content_parts(prompt.get("system"))
        messages = [_message("system", "system", system, name)] if system else []
        messages += _chat_messages(prompt.get("messages"), "input", name)
        if prompt.get("prompt"):
            messages.append(_message("input", "user", _content_parts(prompt["prompt"]), name))
    found: dict[Direction, list[Message]] = {
        "system": [message for message in messages if message.direction == "system"],
        "input": [message for message in messages if message.direction != "system"],
    }
    output = _content_parts(attributes.get("ai.response.text"))
    calls = _json(attributes.get("ai.response.toolCalls") or "[]")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            output += _tool_call(call)
    found["output"] = [_message("output", "assistant", output, name)] if output else []
    return found


PROMPT_FLOW_EVENTS: dict[str, Direction] = {
    "promptflow.function.inputs": "input",
    "promptflow.llm.generated_message": "output",
}
"""Prompt Flow's tracing events whose ``payload`` holds the call's request (its ``messages``) and the model's
message (promptflow-tracing, ``_trace.py``)."""


def _prompt_flow(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    name = "Prompt Flow"
    found: dict[Direction, list[Message]] = defaultdict(list)
    for event_name, event_attributes in events:
        if (direction := PROMPT_FLOW_EVENTS.get(event_name)) is None:
            continue
        payload = _json(event_attributes.get("payload", ""))
        if direction == "input" and isinstance(payload, dict):
            found["input"] += _chat_messages(payload.get("messages"), "input", name)
        elif isinstance(payload, dict) and "role" in payload:
            found["output"].append(_message("output", payload["role"], _chat_parts(payload), name))
    return found


def _plain_values(attributes: Mapping[str, str], events: Events) -> dict[Direction, list[Message]]:
    """Whole-call values when nothing is structured: OpenInference's ``input.value`` / ``output.value`` and plain
    ``gen_ai.prompt`` / ``gen_ai.completion``, shown as one message each, their text as written."""
    found: dict[Direction, list[Message]] = {}
    for direction, keys in (
        ("input", ("input.value", "gen_ai.prompt")),
        ("output", ("output.value", "gen_ai.completion")),
    ):
        for key in keys:
            if value := attributes.get(key):
                found[direction] = [_message(direction, key, [_part("text", value)], "plain value")]
                break
    return found


CONVENTIONS: tuple[Convention, ...] = (
    Convention("GenAI semantic conventions", _semconv),
    Convention("OpenInference", _openinference),
    Convention("OpenLLMetry (indexed)", _openllmetry_indexed),
    Convention("Vercel AI SDK", _vercel),
    Convention("GenAI semantic conventions (events)", _semconv_events),
    Convention("Prompt Flow", _prompt_flow),
    Convention("plain value", _plain_values),
)
"""The conventions, tried in this order; per direction the first that yields a message is shown."""

_DIRECTIONS: tuple[Direction, ...] = ("system", "input", "output")


def span_messages(attributes: Mapping[str, str], events: Events = ()) -> SpanMessages:
    """The messages one span carries, system then input then output, at most :data:`MAX_MESSAGES`.

    ``attributes`` is the span's attribute map as stored (every value a string, structured values as JSON);
    ``events`` its events as ``(name, attributes)`` pairs. Never raises on malformed values: what does not parse
    is shown as text. Empty when the span carries no message (content capture is off in most instrumentations by
    default)."""
    chosen: dict[Direction, list[Message]] = {}
    for convention in CONVENTIONS:
        found = convention.read(attributes, events)
        for direction in _DIRECTIONS:
            said = [message for message in found.get(direction, ()) if message.parts]
            if direction not in chosen and said:
                chosen[direction] = said
        if len(chosen) == len(_DIRECTIONS):
            break
    ordered = [message for direction in _DIRECTIONS for message in chosen.get(direction, [])]
    return SpanMessages(tuple(ordered[:MAX_MESSAGES]), max(0, len(ordered) - MAX_MESSAGES))
