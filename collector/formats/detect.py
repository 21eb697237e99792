"""Recognising a trace file by its content (never by its name).

Order of the checks: gzip magic `1f 8b` → gunzip first, whatever is inside; content starting with `{`, `[`
or `"` → JSON: one document; else the OpenTelemetry SDK's ConsoleSpanExporter output (JSON objects one after
another, the first a span as `console.py` describes it); else JSON lines (at least two non-blank lines, one of
the first two an object on its own); anything else → OTLP protobuf ExportTraceServiceRequest.

A JSON document is then, in this order: OTLP when `otlp.traces_request` finds a request in it (`resourceSpans`,
Tempo's `batches`, the `result` and `trace` envelopes); an array of OTLP requests when its first element is
one; ConsoleSpanExporter spans (one span, or an array of them); Langfuse observations in the shapes
`langfuse.py` lists; SigNoz's trace-detail answers in the shapes `signoz.py` lists (before Jaeger, whose `spans`
key and `spanId` the v2 waterfall shares); any-agent's `AgentTrace` as `anyagent.py` describes it; Jaeger in the
shapes `jaeger.py` lists; Zipkin v2 when it is a list of spans with `traceId` and `id`. A document that looks like
a format Hotspan does not read, or like one of these with a key missing (`_lookalike`: bare OTLP spans, SigNoz's
flamegraph answer or spans without `spanId`, any-agent spans without `start_time`, a Langfuse trace list, Langfuse
observations without times) is refused with a message that names it, before Jaeger and Zipkin can mistake it for
theirs.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import unknown_fields
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.formats import anyagent, console, jaeger, langfuse, signoz, zipkin
from collector.formats.otlp import traces_request
from collector.formats.payload import Format, FormatError

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_JSON_TYPE_NAMES = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
_OTLP_OTHER_SIGNALS = {
    "resourceLogs": "logs",
    "resourceMetrics": "metrics",
    "resourceProfiles": "profiles",
    "resource_logs": "logs",
    "resource_metrics": "metrics",
    "resource_profiles": "profiles",
}


@dataclass(frozen=True)
class Sniffed:
    """A file read whole (gunzipped) and recognised.

    `document` depends on `format`: the parsed JSON value for `otlp-json`, `otlp-json-array`, `jaeger`,
    `langfuse`, `zipkin`, `signoz` and `any-agent`; the decoded text for `otlp-jsonl` and `otel-console` (parsed
    value by value later); the parsed ExportTraceServiceRequest for `otlp-protobuf`, whose serialized form is `raw`.
    """

    format: Format
    document: Any
    raw: bytes


def detect_format(path: Path) -> Format:
    """The format of a trace file, recognised by content.

    Raises FormatError, naming the file, when it cannot be read, is empty, is broken JSON, or is in no
    format Hotspan imports.
    """
    return sniff(path).format


def sniff(path: Path) -> Sniffed:
    """Read a trace file whole and recognise its format (see the module docstring).

    Raises FormatError as `detect_format` does.
    """
    raw = _read(path)
    head = raw.removeprefix(_UTF8_BOM).lstrip()
    if not head:
        raise FormatError(f"{path}: the file is empty")
    if head[:1] in (b"{", b"[", b'"'):
        return _sniff_json(path, raw)
    return _sniff_protobuf(path, raw)


def _read(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise FormatError(f"{path}: gzip data is corrupt or truncated: {exc}") from None


def _sniff_json(path: Path, raw: bytes) -> Sniffed:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: starts like JSON but is not UTF-8 text (byte {exc.start})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if console.is_console_dump(text):
            return Sniffed("otel-console", text, raw)
        if _looks_like_json_lines(path, text):
            return Sniffed("otlp-jsonl", text, raw)
        raise FormatError(_describe_json_error(path, text, exc)) from None
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply to read") from None
    found = _classify(path, document, text)
    return Sniffed(found, text if found == "otel-console" else document, raw)


def _looks_like_json_lines(path: Path, text: str) -> bool:
    """Whether text that is not one JSON document is OTLP JSON lines: at least two non-blank lines, and one
    of the first two is a JSON object on its own (so one broken first line does not hide the format).

    Raises FormatError when it is JSON lines of something other than OTLP trace requests.
    """
    candidates = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    if len(candidates) < 2:
        return False
    for number, line in candidates[:2]:
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        if traces_request(record, line) is None:
            raise FormatError(
                f"{path}: JSON lines, but line {number} is not an OTLP trace export request ({_describe_value(record)})"
            )
        return True
    return False


def _describe_json_error(path: Path, text: str, exc: json.JSONDecodeError) -> str:
    message = f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        message += " (the file ends inside a JSON value; is it truncated?)"
    return message


def _classify(path: Path, document: object, text: str) -> Format:
    if traces_request(document, text) is not None:
        return "otlp-json"
    if isinstance(document, dict):
        for key, signal in _OTLP_OTHER_SIGNALS.items():
            if key in document:
                raise FormatError(f"{path}: OTLP {signal}, not traces ('{key}' instead of 'resourceSpans')")
    if isinstance(document, list) and document and traces_request(document[0], text) is not None:
        return "otlp-json-array"
    if console.is_console_span(document) or (
        isinstance(document, list) and document and console.is_console_span(document[0])
    ):
        return "otel-console"
    if langfuse.observations(document) is not None:
        return "langfuse"
    if signoz.is_signoz(document):
        return "signoz"
    if anyagent.spans(document) is not None:
        return "any-agent"
    lookalike = _lookalike(document)
    if lookalike is not None:
        raise FormatError(f"{path}: it looks like {lookalike}. {_KNOWN}")
    if jaeger.is_jaeger(document):
        return "jaeger"
    if zipkin.is_zipkin_v1(document):
        raise FormatError(f"{path}: Zipkin v1 JSON (binaryAnnotations, annotation endpoints); use Zipkin v2")
    if zipkin.is_zipkin(document):
        return "zipkin"
    if document == []:
        raise FormatError(f"{path}: an empty JSON array, no spans")
    raise FormatError(f"{path}: JSON in no known trace format ({_describe_value(document)}). {_KNOWN}")


_KNOWN = (
    "Hotspan reads OTLP JSON (resourceSpans; Tempo's batches), arrays of OTLP requests, ConsoleSpanExporter "
    "output, Jaeger (data/traceID/spans), Langfuse observations, Zipkin v2 span lists (traceId, id), SigNoz's "
    "trace-detail answers (spans with durationNano) and any-agent traces (spans with context.trace_id)"
)


def _lookalike(document: object) -> str | None:
    """What a JSON document that Hotspan does not read looks like, and what it lacks; None when it looks like
    none of the shapes below. Checked before Jaeger and Zipkin, whose detection these shapes would otherwise
    pass (Langfuse observations have `id` and `traceId`), only for every span to be refused with a message about
    the wrong format."""
    where, first = _first_record(document)
    if where == "" and {"traceId", "spanId", "startTimeUnixNano"} <= first.keys():
        return "a list of OTLP spans without their resourceSpans/scopeSpans envelope, so no service is known"
    if where == "spans" and ("durationNano" in first or "duration_nano" in first):
        return "SigNoz's trace-detail answer (spans with durationNano), but its first span has no 'spanId'"
    if _is_signoz_flamegraph(document):
        return (
            "SigNoz's flamegraph answer (spans by level, without attributes or kinds); save the waterfall answer "
            "(POST /api/v2/traces/waterfall/{traceId}) instead"
        )
    if where in ("", "spans") and isinstance(first.get("context"), dict) and "trace_id" in first["context"]:
        return "an any-agent AgentTrace (spans with context.trace_id), but its first span has no 'start_time'"
    if where == "data" and isinstance(first.get("observations"), list):
        return (
            "a Langfuse trace list (GET /api/public/traces), whose observations are IDs only; save "
            "GET /api/public/observations?traceId=... or GET /api/public/traces/{id} instead"
        )
    if {"id", "type"} <= first.keys() and ("startTime" not in first or "traceId" not in first):
        missing = " or ".join(repr(key) for key in ("startTime", "traceId") if key not in first)
        return f"Langfuse observations, but the first has no {missing}"
    return None


def _is_signoz_flamegraph(document: object) -> bool:
    """Whether a document is SigNoz's flamegraph answer (`GetFlamegraphSpansForTraceResponse`: `spans` a list of
    levels, each a list of spans with `durationNano`)."""
    levels = document.get("spans") if isinstance(document, dict) else None
    first_level = levels[0] if isinstance(levels, list) and levels else None
    return (
        isinstance(first_level, list)
        and bool(first_level)
        and isinstance(first_level[0], dict)
        and ("durationNano" in first_level[0])
    )


def _first_record(document: object) -> tuple[str | None, dict]:
    """The first object of a document's record array and where that array is (`""` for the document itself,
    else its key: `spans`, `data`, `observations`); (None, {}) when there is none."""
    if isinstance(document, list):
        candidates: list[tuple[str, object]] = [("", document)]
    elif isinstance(document, dict):
        candidates = [(key, document.get(key)) for key in ("spans", "data", "observations")]
    else:
        candidates = []
    for where, records in candidates:
        if isinstance(records, list) and records and isinstance(records[0], dict):
            return where, records[0]
    return None, {}


def _describe_value(value: object) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:8]}"
    if isinstance(value, list):
        first = _describe_value(value[0]) if value else "nothing"
        return f"an array whose first element is {first}"
    return f"a JSON {_JSON_TYPE_NAMES.get(type(value), type(value).__name__)}"


def _sniff_protobuf(path: Path, raw: bytes) -> Sniffed:
    not_otlp = f"{path}: neither JSON nor an OTLP protobuf ExportTraceServiceRequest"
    start = raw[:8].hex(" ")
    try:
        request = ExportTraceServiceRequest.FromString(raw)
    except DecodeError as exc:
        raise FormatError(f"{not_otlp} (starts with bytes {start}; protobuf decode failed: {exc})") from None
    # Bytes that happen to decode as protobuf yield only unknown fields; a real request has resourceSpans.
    if not request.resource_spans or len(unknown_fields.UnknownFieldSet(request)):
        raise FormatError(f"{not_otlp} (starts with bytes {start}; no resourceSpans)")
    return Sniffed("otlp-protobuf", request, raw)
