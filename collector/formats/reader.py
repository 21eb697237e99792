"""Turning a trace file into OTLP payloads for the decoder."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from collector.formats import anyagent, console, jaeger, langfuse, signoz, zipkin
from collector.formats.detect import Sniffed, sniff
from collector.formats.otlp import (
    ConvertedSpan,
    chunk_protobuf,
    chunk_requests,
    group_converted,
    protobuf_span_count,
    request_triples,
    traces_request,
)
from collector.formats.payload import FORMAT_NAMES, ContentType, Format, Payload, Rejected
from collector.rejections import Position

DEFAULT_MAX_SPANS_PER_PAYLOAD = 5000

_JSON: ContentType = "application/json"
_PROTOBUF: ContentType = "application/x-protobuf"


def read_payloads(
    path: Path, *, max_spans_per_payload: int = DEFAULT_MAX_SPANS_PER_PAYLOAD
) -> Iterator[Payload | Rejected]:
    """The OTLP payloads of a trace file, each of at most `max_spans_per_payload` spans, and a `Rejected`
    item for each part of the file that could not be converted (the rest is still read).

    - OTLP JSON: the parsed request as is (Jaeger API v3's `result` and Tempo's `trace` envelopes removed,
      Tempo's `batches` and OTLP's pre-0.15 names renamed: `otlp.traces_request`);
    - an array of OTLP JSON requests: each element as one, source `file.json#/<index>`; an element that is
      not an OTLP trace request is a `Rejected` with that source;
    - OTLP JSON lines: one payload per non-blank line, source `file.jsonl:<line>`; a line that is not JSON
      or not an OTLP trace request is a `Rejected` with that source, in line order;
    - OTLP protobuf: the (gunzipped) bytes as is;
    - ConsoleSpanExporter output, Jaeger, Langfuse, Zipkin, SigNoz, any-agent: converted to OTLP JSON (see
      `console.py`, `jaeger.py`, `langfuse.py`, `zipkin.py`, `signoz.py`, `anyagent.py`); each span that cannot
      be converted is a `Rejected` (a line or JSON pointer source), yielded before the payloads.

    Larger inputs are split into several payloads, resource and scope repeated in each; their sources
    read `file.json (spans 5001-10000 of 12000)`. The file is read and recognised when this is called,
    so FormatError (naming the file) is raised here, not on iteration; ValueError for a
    `max_spans_per_payload` below 1. Validating spans (IDs, times) is the decoder's job, except where a
    conversion needs a value it cannot read.
    """
    if max_spans_per_payload < 1:
        raise ValueError(f"max_spans_per_payload must be at least 1, got {max_spans_per_payload}")
    return _payloads(sniff(path), str(path), max_spans_per_payload)


def _payloads(sniffed: Sniffed, source: str, max_spans: int) -> Iterator[Payload | Rejected]:
    match sniffed.format:
        case "otlp-protobuf":
            total = protobuf_span_count(sniffed.document)
            if total <= max_spans:
                yield Payload(_PROTOBUF, sniffed.raw, source)
            else:
                yield from _labelled(chunk_protobuf(sniffed.document, max_spans), _PROTOBUF, source, total)
        case "otlp-json":
            yield from _request_payloads(traces_request(sniffed.document, sniffed.raw) or {}, source, max_spans)
        case "otlp-json-array":
            yield from _request_array(sniffed.document, sniffed.raw, source, max_spans)
        case "otlp-jsonl":
            yield from _json_lines(sniffed.document, source, max_spans)
        case "otel-console":
            yield from _converted(console.convert(sniffed.document, source), source, max_spans, sniffed.format)
        case "jaeger":
            yield from _converted(jaeger.convert(sniffed.document, source), source, max_spans, sniffed.format)
        case "langfuse":
            yield from _converted(langfuse.convert(sniffed.document, source), source, max_spans, sniffed.format)
        case "zipkin":
            yield from _converted(zipkin.convert(sniffed.document, source), source, max_spans, sniffed.format)
        case "signoz":
            yield from _converted(signoz.convert(sniffed.document, source), source, max_spans, sniffed.format)
        case "any-agent":
            yield from _converted(anyagent.convert(sniffed.document, source), source, max_spans, sniffed.format)


def _request_payloads(request: dict, source: str, max_spans: int) -> Iterator[Payload]:
    triples = request_triples(request)
    # An irregular request cannot be split; it goes whole to the decoder, which says what is wrong.
    if triples is None or len(triples) <= max_spans:
        yield Payload(_JSON, request, source)
    else:
        yield from _labelled(chunk_requests(triples, max_spans), _JSON, source, len(triples))


def _request_array(requests: list, text: bytes, source: str, max_spans: int) -> Iterator[Payload | Rejected]:
    for index, element in enumerate(requests):
        element_source = f"{source}#/{index}"
        request = traces_request(element, text)
        if request is None:
            yield Rejected(element_source, "not an OTLP trace export request (no 'resourceSpans')", None)
            continue
        yield from _request_payloads(request, element_source, max_spans)


def _json_lines(text: str, source: str, max_spans: int) -> Iterator[Payload | Rejected]:
    # Only "\n" ends a line: str.splitlines would also split at U+2028, which JSON allows inside strings.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        line_source = f"{source}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield Rejected(line_source, f"not valid JSON at column {exc.colno}: {exc.msg}", None)
            continue
        except RecursionError:
            yield Rejected(line_source, "JSON nested too deeply to read", None)
            continue
        request = traces_request(record, line)
        if request is None:
            yield Rejected(line_source, "not an OTLP trace export request (no 'resourceSpans')", None)
            continue
        yield from _request_payloads(request, line_source, max_spans)


def _converted(
    items: Iterable[ConvertedSpan | Rejected], source: str, max_spans: int, read_as: Format
) -> Iterator[Payload | Rejected]:
    """The payloads of converted spans, after the rejections; when every span was rejected, a last `Rejected`
    (no span count, the spans are counted already) names the format the file was read as, so that the user can
    tell a file in another format from a file with bad spans."""
    spans: list[ConvertedSpan] = []
    rejected = False
    for item in items:
        if isinstance(item, Rejected):
            rejected = True
            yield item
        else:
            spans.append(item)
    if rejected and not spans:
        yield Rejected(source, f"read as {FORMAT_NAMES[read_as]}, and none of its spans could be converted", 0)
    triples = group_converted(spans)
    where = {id(converted.span): converted.where for converted in spans}
    for payload in _labelled(chunk_requests(triples, max_spans), _JSON, source, len(triples)):
        body = payload.body
        yield replace(payload, span_sources=_span_sources(body, where)) if isinstance(body, dict) else payload


def _span_sources(request: dict, where: dict[int, str]) -> dict[Position, str]:
    """Each span's place in its file (``where``, by the identity of its OTLP-JSON dict) by its position in the
    OTLP-JSON ``request`` built of those dicts."""
    return {
        (r_index, s_index, p_index): where[id(span)]
        for r_index, resource_spans in enumerate(request["resourceSpans"])
        for s_index, scope_spans in enumerate(resource_spans["scopeSpans"])
        for p_index, span in enumerate(scope_spans["spans"])
    }


def _labelled(
    chunks: Iterable[tuple[dict | bytes, int]], content_type: ContentType, source: str, total: int
) -> Iterator[Payload]:
    """Payloads for the chunks of one input of `total` spans; a chunk's source names its span range when
    the input was split."""
    first = 1
    for body, count in chunks:
        last = first + count - 1
        label = source if count == total else f"{source} (spans {first}-{last} of {total})"
        yield Payload(content_type, body, label)
        first = last + 1
