"""The file-format layer of `hotspan import`: read a trace file, recognise its format by content, and
yield OTLP payloads for the decoder.

Formats: OTLP JSON (also as Grafana Tempo's API answers and Grafana's trace download), JSON arrays of OTLP
requests, OTLP JSON lines, OTLP protobuf (each optionally gzipped); converted to OTLP JSON: the OpenTelemetry
SDK's ConsoleSpanExporter output, Jaeger JSON (API/UI download, trace objects, UI state, domain model), Langfuse
observation exports, Zipkin v2 JSON, SigNoz's trace-detail answers (v2 and v3 waterfall, v1 rows) and any-agent's
`AgentTrace` JSON. JSON in none of them is refused naming what it looks like.
This layer converts only; the decoder validates spans and counts what was imported.

Errors surface in two ways:

- `FormatError` (a ValueError) from `detect_format`/`read_payloads`: the whole file is unusable;
- `Rejected` items among the payloads `read_payloads` yields: one JSON line or array element, or one converted
  span (ConsoleSpanExporter, Jaeger, Langfuse, Zipkin, SigNoz, any-agent), could not be converted; the rest of
  the file is still yielded. Callers report them with the decoder's own per-span rejections.
"""

from collector.formats.detect import detect_format
from collector.formats.payload import ContentType, Format, FormatError, Payload, Rejected
from collector.formats.reader import DEFAULT_MAX_SPANS_PER_PAYLOAD, read_payloads

__all__ = [
    "DEFAULT_MAX_SPANS_PER_PAYLOAD",
    "ContentType",
    "Format",
    "FormatError",
    "Payload",
    "Rejected",
    "detect_format",
    "read_payloads",
]
