"""The emulated model's tool-call rule and minimal JSON-Schema arguments (``engine.tool_calls``)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

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
