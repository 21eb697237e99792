"""A Jaeger UI trace file imported into Hotspan (``collector.formats``, as ``hotspan import`` reads it) comes back
from ``/api/traces/{id}`` as the same Jaeger JSON, up to what OTLP storage cannot keep. The differences, each
asserted below rather than ignored:

- trace IDs of 64 bits come back zero-padded to 32 hex characters (Hotspan's ID rule);
- ``flags`` is 1 and ``warnings`` are null: OTLP carries neither;
- the ``error=true`` tag is stored as the span status, so it comes back with ``otel.status_code=ERROR``;
- a ``binary`` tag is stored as base64 text and comes back as that ``string`` (no rule can tell it from text);
- the parent (the first ``CHILD_OF`` inside the trace) comes first among the references;
- a log without an ``event`` field is stored as an OTLP event named ``log`` and comes back with ``event=log``;
- the file's two spans sharing span ID ``0000000000000002`` differ in name, so both are kept: the collector
  treats only spans equal in trace ID, span ID, kind, name and start as one span sent twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jaeger_support import TRACES, JaegerEnvelope, JaegerTrace

from collector.formats import Payload, read_payloads
from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings

UI_TRACE = TRACES / "jaeger" / "jaeger__ui_01.json"


@pytest.fixture(scope="module")
def imported_server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    server = start_server(
        load_settings(
            data_dir=tmp_path_factory.mktemp("jaeger_import"),
            clickhouse_dsn=chdb_dsn,
            clickhouse_database=f"ji_{uuid.uuid4().hex[:12]}",
            http_port=0,
            grpc_port=-1,
        )
    )
    payloads = list(read_payloads(UI_TRACE))
    assert payloads and all(isinstance(p, Payload) for p in payloads)
    for payload in payloads:
        assert isinstance(payload, Payload)
        answer = httpx.post(f"{server.base_url}/v1/traces", json=payload.body)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {}, "no span rejected"
    yield server
    server.stop()


def pad(trace_id: str) -> str:
    return trace_id.rjust(32, "0")


def expected_span(original: dict[str, Any], trace_id: str) -> dict[str, Any]:
    """What Hotspan answers for a span of the file, by the module's rules."""
    tags = [_tag(t) for t in original["tags"]]
    if any(t["key"] == "error" and t["value"] is True for t in original["tags"]):
        tags.append({"key": "otel.status_code", "type": "string", "value": "ERROR"})
    logs = [{"timestamp": log["timestamp"], "fields": _log_fields(log["fields"])} for log in original["logs"]]
    references = [
        {"refType": r["refType"], "traceID": pad(r["traceID"]), "spanID": r["spanID"]} for r in original["references"]
    ]
    return {
        "traceID": trace_id,
        "spanID": original["spanID"],
        "flags": 1,
        "operationName": original["operationName"],
        "references": _sorted(references),
        "startTime": original["startTime"],
        "duration": original["duration"],
        "tags": _sorted(tags),
        "logs": logs,
        "warnings": None,
    }


def test_jaeger_ui_trace_round_trips(imported_server: RunningServer) -> None:
    original = json.loads(UI_TRACE.read_text())
    answer = httpx.get(f"{imported_server.base_url}/api/traces/{original['traceID']}")
    envelope = JaegerEnvelope[list[JaegerTrace]].model_validate(answer.json())
    assert envelope.data is not None and len(envelope.data) == 1
    trace = answer.json()["data"][0]
    assert trace["traceID"] == pad(original["traceID"]) and trace["warnings"] is None

    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    assert sorted(services.values()) == sorted(p["serviceName"] for p in original["processes"].values())
    got = sorted((_comparable(s, services) for s in trace["spans"]), key=_key)
    want = sorted(
        (
            {
                **expected_span(s, trace["traceID"]),
                "service": original["processes"][s["processID"]]["serviceName"],
            }
            for s in original["spans"]
        ),
        key=_key,
    )
    assert got == want
    # The parent leads the references, so Jaeger UI's tree (built from the first reference) is right.
    with_parent = next(s for s in trace["spans"] if s["operationName"] == "reference-test")
    assert with_parent["references"][0] == {
        "refType": "CHILD_OF",
        "traceID": pad("1"),
        "spanID": "0000000000000002",
    }


def _log_fields(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A log without an ``event`` field becomes an OTLP event named ``log``, and that name comes back as a field."""
    named = [] if any(f["key"] == "event" for f in fields) else [{"key": "event", "type": "string", "value": "log"}]
    return named + [_tag(f) for f in fields]


def _tag(tag: dict[str, Any]) -> dict[str, Any]:
    if tag["type"] == "binary":
        return {"key": tag["key"], "type": "string", "value": tag["value"]}
    return dict(tag)


def _comparable(span: dict[str, Any], services: dict[str, str]) -> dict[str, Any]:
    out = {k: v for k, v in span.items() if k != "processID"}
    out["references"] = _sorted(span["references"])
    out["tags"] = _sorted(span["tags"])
    out["service"] = services[span["processID"]]
    return out


def _sorted(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def _key(span: dict[str, Any]) -> tuple[str, str]:
    return span["spanID"], span["operationName"]
