"""What the file-format layer hands on: OTLP payloads, rejected input, and the file-level error."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from collector.rejections import Position

Format = Literal[
    "otlp-json",
    "otlp-json-array",
    "otlp-jsonl",
    "otlp-protobuf",
    "otel-console",
    "jaeger",
    "zipkin",
    "langfuse",
    "signoz",
    "any-agent",
]
"""The file formats `hotspan import` recognises, by content."""

FORMAT_NAMES: dict[Format, str] = {
    "otlp-json": "OTLP JSON",
    "otlp-json-array": "a JSON array of OTLP requests",
    "otlp-jsonl": "OTLP JSON lines",
    "otlp-protobuf": "OTLP protobuf",
    "otel-console": "OpenTelemetry SDK ConsoleSpanExporter output",
    "jaeger": "Jaeger JSON",
    "zipkin": "Zipkin v2 JSON",
    "langfuse": "a Langfuse observation export",
    "signoz": "a SigNoz trace-detail answer",
    "any-agent": "an any-agent AgentTrace",
}
"""Each format as messages name it."""

ContentType = Literal["application/json", "application/x-protobuf"]


@dataclass(frozen=True)
class Payload:
    """One OTLP ExportTraceServiceRequest ready for the decoder.

    `body` is a dict for `application/json`: an OTLP-JSON ExportTraceServiceRequest with camelCase keys
    as the OTLP/JSON spec writes them (hex IDs, `kind`/`status.code` as ints, times in **nanoseconds**
    as decimal strings). It is `bytes` for `application/x-protobuf`: a serialized request, already
    gunzipped. A payload holds at most the `max_spans_per_payload` spans `read_payloads` was given.
    """

    content_type: ContentType
    body: dict | bytes
    source: str
    """Where the payload came from, for messages: `file.json`, `file.jsonl:17` (line 17), and with
    ` (spans 5001-10000 of 12000)` appended when a file was split."""
    span_sources: Mapping[Position, str] = field(default_factory=dict)
    """For a payload converted from another format: each span's place in its file (`file.json#/data/0/spans/3`)
    by its position in `body`, so that a message about a span names the file's place, not the request's."""


@dataclass(frozen=True)
class Rejected:
    """Input that could not be turned into OTLP; the rest of the file is still read.

    One item per unusable JSON line (OTLP JSON lines) or array element, or per unusable converted span
    (ConsoleSpanExporter, Jaeger, Langfuse, Zipkin, SigNoz, any-agent). `source` names the place: `file.jsonl:17`
    for a line (or a printed ConsoleSpanExporter object), an RFC 6901 JSON pointer for an element or a span
    (`file.json#/data/0/spans/4`). `reason` says what is wrong and names the field.
    `span_count` is the number of spans lost, `None` where it cannot be known (a line that is not JSON), 0 for
    the note that closes a converted file whose every span was rejected (the file's source, naming the format it
    was read as: the spans are counted by their own items).
    """

    source: str
    reason: str
    span_count: int | None


class FormatError(ValueError):
    """The file cannot be read or its format is not recognised; the message names the file and the problem.

    Nothing of such a file is imported.
    """


class SpanError(ValueError):
    """Raised inside a converter: one span cannot be converted; the message names the field. The converter
    turns it into a `Rejected` item and goes on with the next span."""
