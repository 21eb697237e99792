"""The emulated model's tool-call rule and minimal JSON-Schema arguments (``engine.tool_calls``)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from instrumented_stack.engine.anthropic_protocol import MessagesRequest
from instrumented_stack.engine.responses_protocol import ResponsesRequest, function_call_name
from instrumented_stack.engine.tool_calls import minimal_arguments, plan_tool_call

SCHEMAS: list[dict[str, Any]] = [
    {},
    {"type": "object", "properties": {"q": {"type": "string"}}},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 12},
            "code": {"type": "string", "maxLength": 3},
            "n": {"type": "integer", "exclusiveMinimum": 4, "maximum": 9},
            "x": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 0},
            "flag": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2},
            "maybe": {"type": ["null", "integer"], "minimum": 0},
            "kind": {"const": "fixed"},
            "nested": {"$ref": "#/$defs/Point"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": ["name", "code", "n", "x", "flag", "tags", "maybe", "kind", "nested", "either"],
        "additionalProperties": False,
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            }
        },
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_minimal_arguments_validate_against_their_schema(schema: dict[str, Any]) -> None:
    jsonschema.validate(minimal_arguments(schema), schema or {"type": "object"})


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": SCHEMAS[1]}}


def _called(name: str) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": name, "arguments": "{}"}}]}


def test_each_offered_tool_is_called_once_per_user_turn_then_text() -> None:
    tools = [_tool("a"), _tool("b")]
    turn: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first = plan_tool_call(turn, tools, None)
    assert first is not None and first.name == "a" and json.loads(first.arguments) == {}
    turn += [_called("a"), {"role": "tool", "tool_call_id": "1", "content": "x"}]
    second = plan_tool_call(turn, tools, "auto")
    assert second is not None and second.name == "b"
    turn += [_called("b"), {"role": "tool", "tool_call_id": "2", "content": "y"}]
    assert plan_tool_call(turn, tools, None) is None
    assert plan_tool_call([*turn, {"role": "user", "content": "again"}], tools, None) is not None
    assert plan_tool_call(turn[:1], tools, "none") is None
    forced = plan_tool_call(turn[:1], tools, {"type": "function", "function": {"name": "b"}})
    assert forced is not None and forced.name == "b"
    assert plan_tool_call(turn[:1], [], None) is None


TRACE_ID = "4BF92F3577B34DA6A3CE929D0E0E4736"
TRACE_TOOL = {
    "type": "object",
    "properties": {
        "trace_id": {"type": "string"},
        "trace_id_b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "trace_id_format": {"enum": ["w3c"]},
        "traced": {"type": "string"},
    },
    "required": ["trace_id", "trace_id_b", "trace_id_format", "traced"],
}


def test_a_trace_id_in_the_question_fills_the_trace_id_arguments() -> None:
    tools = [{"type": "function", "function": {"name": "explain", "parameters": TRACE_TOOL}}]
    asked = {
        "trace_id": TRACE_ID.lower(),
        "trace_id_b": TRACE_ID.lower(),
        "trace_id_format": "w3c",
        "traced": "example",
    }
    parts = [{"type": "text", "text": f"why is trace {TRACE_ID} slow?"}]
    chat = plan_tool_call([{"role": "user", "content": "see 0123"}, {"role": "user", "content": parts}], tools, None)
    assert chat is not None and json.loads(chat.arguments) == asked
    responses = ResponsesRequest(model="m", input=f"is {TRACE_ID} slow?").chat_messages()
    messages = MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": parts}]}
    ).openai_messages()
    for conversation in (responses, messages):
        planned = plan_tool_call(conversation, tools, None)
        assert planned is not None and json.loads(planned.arguments) == asked
    # Without an ID in the last user message the rule is the minimal one.
    plain = plan_tool_call(
        [{"role": "user", "content": f"{TRACE_ID}"}, {"role": "user", "content": "why?"}], tools, None
    )
    assert plain is not None and json.loads(plain.arguments) == asked | dict.fromkeys(
        ("trace_id", "trace_id_b"), "example"
    )


def test_a_namespaces_functions_are_called_by_namespace_and_name() -> None:
    """Codex offers each MCP server's tools as one Responses API namespace tool (``mcp__<server>``)."""
    explain = [{"type": "function", "name": "explain"}]
    # Codex's sub-agent tools come as a namespace too, which the emulated model leaves alone.
    tools = [{"type": "namespace", "name": name, "tools": explain} for name in ("multi_agent_v1", "mcp__hotspan")]
    request = ResponsesRequest(model="m", input="hi", tools=tools)
    planned = plan_tool_call(request.chat_messages(), request.chat_tools(), None)
    assert planned is not None and function_call_name(planned.name) == {"namespace": "mcp__hotspan", "name": "explain"}
    called = {
        "type": "function_call",
        "call_id": "c",
        "namespace": "mcp__hotspan",
        "name": "explain",
        "arguments": "{}",
    }
    answered = ResponsesRequest(
        model="m",
        input=[{"role": "user", "content": "hi"}, called, {"type": "function_call_output", "call_id": "c"}],
        tools=tools,
    )
    assert plan_tool_call(answered.chat_messages(), answered.chat_tools(), None) is None
    assert function_call_name("plain") == {"name": "plain"}
