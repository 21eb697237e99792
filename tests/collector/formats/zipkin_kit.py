"""Helpers for the Zipkin converter's tests: converted spans as plain dicts, and the documented derivation of
a shared server half's span ID computed independently of the code under test."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from collector.formats import Payload, Rejected, read_payloads, zipkin

TESTDATA = Path(__file__).resolve().parent / "testdata"


def converted(path: Path) -> list[dict[str, Any]]:
    """Each span of a Zipkin file as `read_payloads` hands it on, with `service` and `scope` added."""
    spans = []
    for payload in read_payloads(path):
        assert isinstance(payload, Payload), payload
        for resource_spans in payload.body["resourceSpans"]:
            [service] = resource_spans["resource"]["attributes"]
            assert service["key"] == "service.name"
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    spans.append({**span, "service": service["value"]["stringValue"], "scope": scope_spans["scope"]})
    return spans


def convert_records(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Rejected]]:
    """The OTLP spans (with `service` added) and the rejections of an in-memory Zipkin v2 span list."""
    spans: list[dict[str, Any]] = []
    rejected: list[Rejected] = []
    for item in zipkin.convert(records, "t.json"):
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            spans.append({**item.span, "service": item.resource["attributes"][0]["value"]["stringValue"]})
    return spans, rejected


def only(spans: list[dict[str, Any]], **match: object) -> dict[str, Any]:
    """The one span whose fields equal `match`."""
    [span] = [span for span in spans if all(span.get(key) == value for key, value in match.items())]
    return span


def attributes(span: dict[str, Any]) -> dict[str, dict]:
    """A span's attributes as key → OTLP AnyValue."""
    return {kv["key"]: kv["value"] for kv in span.get("attributes", [])}


def server_half_id(trace_id: str, span_id: str, local: dict[str, Any], attempt: int = 0) -> str:
    """The span ID `collector/formats/zipkin_shared.py`'s docstring promises the server half of `span_id`
    whose `localEndpoint` is `local`: SHA-256 of `<traceId>/<id>/<serviceName>/<ipv4>/<ipv6>/<port>` (missing
    fields empty, `/<attempt>` appended on a clash), first 16 hex digits. `trace_id` is the padded 32 digits."""
    fields = [str(local.get(key) or "") for key in ("serviceName", "ipv4", "ipv6", "port")]
    text = "/".join([trace_id, span_id, *fields]) + (f"/{attempt}" if attempt else "")
    return hashlib.sha256(text.encode()).hexdigest()[:16]
