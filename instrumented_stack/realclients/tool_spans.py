"""The tool span an app writes around each tool run, in each convention's spelling (``chat_loop.ToolSpanShape``):
the SDK instrumentations trace the model calls only, so the drivers' hand-written agent loops open these.

Each function takes ``(tool name, call id, arguments JSON)`` and returns the span's name and attributes.
"""

from __future__ import annotations


def genai_tool(name: str, call_id: str, _arguments: str) -> tuple[str, dict[str, str]]:
    """GenAI semconv's ``execute_tool <name>`` (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``.call.id``)."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
    return f"execute_tool {name}", attributes


def openinference_tool(name: str, call_id: str, arguments: str) -> tuple[str, dict[str, str]]:
    """OpenInference's TOOL span: ``<name>``, ``openinference.span.kind=TOOL``, ``tool.name``, the input."""
    attributes = {
        "openinference.span.kind": "TOOL",
        "tool.name": name,
        "tool_call.id": call_id,
        "input.value": arguments,
        "input.mime_type": "application/json",
    }
    return name, attributes


def traceloop_tool(name: str, _call_id: str, arguments: str) -> tuple[str, dict[str, str]]:
    """The shape Traceloop's SDK ``@tool`` decorator writes: ``<name>.tool``, ``traceloop.span.kind=tool``,
    ``traceloop.entity.name`` and ``.input`` (written by the driver without installing ``traceloop-sdk``, which
    brings every instrumentation it has)."""
    attributes = {"traceloop.span.kind": "tool", "traceloop.entity.name": name, "traceloop.entity.input": arguments}
    return f"{name}.tool", attributes
