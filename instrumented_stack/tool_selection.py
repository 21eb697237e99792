"""Tool selection: check a planned tool call against the tool definitions' JSON Schemas (``jsonschema``).

Two validation modes (``AgentConfig.tool_validation``):

- ``cached`` (default): one validator per tool, built and checked once when the agent starts; a call
  validates its arguments against its own tool's schema only (tens of microseconds).
- ``per_call``: every call rebuilds a validator for *every* tool definition, re-checks each schema against
  the draft 2020-12 metaschema, and collects all errors with format checking, to rank the candidates - the
  kind of CPU hotspot that creeps into orchestration code (milliseconds per call: the
  ``orchestration_cpu_hotspot`` fault).

Either way the span ``validate_tool_args`` (INTERNAL, ``gen_ai.tool.name``, ``tool.schemas_checked``,
``tool.args_valid``) covers the work.
"""

from __future__ import annotations

from typing import Any, Literal

from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from opentelemetry.trace import SpanKind, Tracer

from instrumented_stack.semconv import GEN_AI_TOOL_NAME, TOOL_SCHEMAS_CHECKED, TOOL_VALID

ValidationMode = Literal["cached", "per_call"]


class UnknownToolError(LookupError):
    """The plan named a tool the tool service does not define."""


def _build_validator(schema: dict[str, Any]) -> Validator:
    validator_class = validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


class ToolSelector:
    """Validates tool arguments against tool definitions (``{"name", "parameters"}`` dicts).

    Raises:
        jsonschema.exceptions.SchemaError: from the constructor, for an invalid schema.
    """

    def __init__(self, definitions: list[dict[str, Any]], mode: ValidationMode, tracer: Tracer) -> None:
        self._schemas = {definition["name"]: definition["parameters"] for definition in definitions}
        self._mode = mode
        self._tracer = tracer
        self._validators = {name: _build_validator(schema) for name, schema in self._schemas.items()}

    def validate(self, tool: str, arguments: dict[str, Any]) -> list[str]:
        """Error messages of ``arguments`` for ``tool`` (empty when valid). Raises :class:`UnknownToolError`."""
        if tool not in self._schemas:
            raise UnknownToolError(f"unknown tool {tool!r}; known: {sorted(self._schemas)}")
        with self._tracer.start_as_current_span(
            "validate_tool_args", kind=SpanKind.INTERNAL, attributes={GEN_AI_TOOL_NAME: tool}
        ) as span:
            if self._mode == "per_call":
                ranked = {
                    name: list(_build_validator(schema).iter_errors(arguments))
                    for name, schema in self._schemas.items()
                }
                errors = ranked[tool]
                checked = len(ranked)
            else:
                errors = list(self._validators[tool].iter_errors(arguments))
                checked = 1
            messages = [error.message for error in errors]
            span.set_attributes({TOOL_SCHEMAS_CHECKED: checked, TOOL_VALID: not messages})
            return messages
