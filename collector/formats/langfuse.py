"""Langfuse observation exports, converted to OTLP-JSON spans with the attributes the Langfuse SDK v3 writes.

Shapes read (Langfuse public API, `Observation` / `ObservationsView` in its OpenAPI spec and the JS client's
`ApiObservation`): the page `GET /api/public/observations` answers (`{"data": [observation, ...], "meta":
{...}}`), a bare array of observations, and one trace as `GET /api/public/traces/{traceId}` answers it (the
trace's fields with `observations: [observation, ...]`). An observation holds `id`, `traceId`, `type`
(`GENERATION`, `SPAN`, `EVENT`, and in Langfuse v3 `AGENT`, `TOOL`, `CHAIN`, `RETRIEVER`, `EMBEDDING`,
`EVALUATOR`, `GUARDRAIL`), `name`, `startTime`, `endTime`, `completionStartTime` (ISO 8601), `parentObservationId`,
`model`, `modelParameters`, `usage` (`input`, `output`, `total`, `unit`), `usageDetails` and `costDetails`
(usage type → count, USD), `level` (`DEBUG`, `DEFAULT`, `WARNING`, `ERROR`), `statusMessage`, `environment`.

Each observation becomes one INTERNAL span whose attributes are those Langfuse's own OpenTelemetry SDK (v3)
writes, so the stage rules read a GENERATION as an LLM call with its first token: `langfuse.observation.type`
(lower case), `.model.name`, `.model.parameters`, `.usage_details`, `.cost_details` (JSON objects as text),
`.completion_start_time` (JSON-quoted ISO 8601, as the SDK writes it), `.level`, `.status_message`, and
`langfuse.environment`. A level of `ERROR` is status ERROR with the status message.

IDs: a 32-hex-digit trace ID and a 16-hex-digit observation ID (what Langfuse v3 stores from OpenTelemetry)
are kept; other IDs (Langfuse v2's UUIDs and free-form strings) are hashed (BLAKE2b, 16 or 8 bytes) so that a
re-import gives the same span IDs, the original kept as `langfuse.trace.id` / `langfuse.observation.id`.
The export names no service: every span's resource has `service.name` `langfuse`. An EVENT without `endTime`
is a point in time (ends at its start); any other observation without `endTime` never ended and is rejected.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from collector.formats.otlp import (
    SERVICE_NAME,
    SPAN_KIND_INTERNAL,
    STATUS_CODE_ERROR,
    ConvertedSpan,
    attribute_list,
    status_value,
    string_value,
)
from collector.formats.payload import Rejected, SpanError
from collector.formats.times import rfc3339_to_nanos

SERVICE = "langfuse"
"""`service.name` of converted observations: the export does not say which service made them."""

_HEX = re.compile(r"[0-9a-fA-F]+")
_REQUIRED = ("id", "type", "startTime")


def observations(document: object) -> tuple[str, list] | None:
    """The observations of a Langfuse export and the JSON pointer of their array (`/data`, `/observations`,
    or `` for a bare array), or None when the document is none of the shapes the module docstring lists.

    An array counts when its first element is an object with `id`, `type`, `startTime` and `traceId` (in a
    trace's `observations`, a missing `traceId` is the trace's `id`); Zipkin v2 spans, the nearest other shape,
    have `id` and `traceId` but a numeric `timestamp`, never `startTime` and `type`.
    """
    if isinstance(document, list):
        found: tuple[str, object] = ("", document)
    elif isinstance(document, dict) and isinstance(document.get("data"), list):
        found = ("/data", document["data"])
    elif isinstance(document, dict) and isinstance(document.get("observations"), list):
        found = ("/observations", document["observations"])
    else:
        return None
    pointer, items = found
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        return None
    first = items[0]
    has_trace = "traceId" in first or pointer == "/observations"
    return (pointer, items) if has_trace and all(key in first for key in _REQUIRED) else None


def convert(document: object, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """One span per observation (`observations(document)` not None), in file order; an observation that
    cannot be converted is a `Rejected` with a JSON pointer source (`<source>#/data/3`)."""
    found = observations(document)
    if found is None:
        return
    pointer, items = found
    trace_of_document = document.get("id") if pointer == "/observations" and isinstance(document, dict) else None
    for index, raw in enumerate(items):
        where = f"{source}#{pointer}/{index}"
        try:
            yield replace(_converted(raw, trace_of_document), where=where)
        except SpanError as error:
            yield Rejected(where, str(error), 1)


def _converted(raw: object, trace_of_document: object) -> ConvertedSpan:
    if not isinstance(raw, dict):
        raise SpanError(f"{raw!r} is not an observation object")
    observation_type = raw.get("type")
    if not isinstance(observation_type, str) or not observation_type:
        raise SpanError(f"type {observation_type!r} is not an observation type such as 'GENERATION'")
    trace_id, original_trace = _id(raw.get("traceId") or trace_of_document, 16, "traceId")
    span_id, original_span = _id(raw.get("id"), 8, "id")
    start = rfc3339_to_nanos(raw.get("startTime"), "startTime")
    if raw.get("endTime") is not None:
        end = rfc3339_to_nanos(raw["endTime"], "endTime")
    elif observation_type.upper() == "EVENT":
        end = start
    else:
        raise SpanError(f"endTime is missing: this {observation_type} never ended")
    attributes = {"langfuse.observation.type": string_value(observation_type.lower())}
    for key, value in _langfuse_attributes(raw).items():
        attributes[key] = string_value(value)
    if original_trace is not None:
        attributes["langfuse.trace.id"] = string_value(original_trace)
    if original_span is not None:
        attributes["langfuse.observation.id"] = string_value(original_span)
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": raw.get("name") if isinstance(raw.get("name"), str) and raw["name"] else observation_type.lower(),
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": attribute_list(attributes),
        "status": _status(raw),
    }
    if raw.get("parentObservationId") is not None:
        span["parentSpanId"] = _id(raw["parentObservationId"], 8, "parentObservationId")[0]
    return ConvertedSpan({"attributes": attribute_list({SERVICE_NAME: string_value(SERVICE)})}, {}, span)


def _langfuse_attributes(raw: dict) -> dict[str, str]:
    """The Langfuse SDK's attribute values (text) for an observation's fields that are set."""
    values: dict[str, str] = {}
    texts = (
        ("model", "langfuse.observation.model.name"),
        ("level", "langfuse.observation.level"),
        ("statusMessage", "langfuse.observation.status_message"),
        ("environment", "langfuse.environment"),
    )
    for field, key in texts:
        if isinstance(raw.get(field), str) and raw[field]:
            values[key] = raw[field]
    objects = (
        ("modelParameters", "langfuse.observation.model.parameters"),
        ("usageDetails", "langfuse.observation.usage_details"),
        ("costDetails", "langfuse.observation.cost_details"),
    )
    for field, key in objects:
        if isinstance(raw.get(field), dict) and raw[field]:
            values[key] = json.dumps(raw[field])
    usage = raw.get("usage")
    if "langfuse.observation.usage_details" not in values and isinstance(usage, dict):
        counts = {name: usage[name] for name in ("input", "output", "total") if isinstance(usage.get(name), int)}
        if counts:
            values["langfuse.observation.usage_details"] = json.dumps(counts)
    if raw.get("completionStartTime") is not None:
        rfc3339_to_nanos(raw["completionStartTime"], "completionStartTime")  # SpanError unless it is a time
        values["langfuse.observation.completion_start_time"] = json.dumps(raw["completionStartTime"])
    return values


def _status(raw: dict) -> dict:
    if raw.get("level") != "ERROR":
        return {}
    message = raw.get("statusMessage")
    return status_value(STATUS_CODE_ERROR, message if isinstance(message, str) else "")


def _id(value: object, size: int, field: str) -> tuple[str, str | None]:
    """An ID as `size` bytes of lowercase hex, and the original when it had to be hashed (None otherwise).

    Raises SpanError naming `field` when `value` is not a non-empty string.
    """
    if not isinstance(value, str) or not value:
        raise SpanError(f"{field} {value!r} is not an ID")
    if len(value) == 2 * size and _HEX.fullmatch(value) and value.strip("0"):
        return value.lower(), None
    return hashlib.blake2b(value.encode(), digest_size=size).hexdigest(), value
