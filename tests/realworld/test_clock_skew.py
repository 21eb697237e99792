"""Clock skew in real Zipkin captures, served: a server whose clock is off is moved into the client that called it,
whatever the size of the skew, so the critical path credits its work (found by a fresh user's sweep: zipkin-lens's
``ascend.json``, where the auth service's half of a shared span starts 5.1 ms after the gateway's half ended, gave
the auth service 0 ms and the gateway's call 14 ms of network, while the same trace skewed by 5 s more was right).

A second sweep found the same with jaeger-ui's HotROD capture (Jaeger's v3 ``GetTrace`` answer, OTLP): with the
route service's clock 5 ms behind, 7 of its 10 calls were left crossing their client's start, the clamp cut them and
their clients read 9.5 ms of network; 5 ms ahead, the calls read as work trailing their callers, which were extended
past the root's end (the request 4.7 ms longer than its root, 31 ms of the frontend's waiting as its own time).

Each capture (``public/``: zipkin-lens's ``ascend.json`` and ``skew.json``, jaeger-ui's HotROD trace) goes through
``hotspan import``'s path to a served Hotspan over OTLP/HTTP, as is and with one service's clock moved by the
amounts of :data:`SKEWS_US` (its resource then naming a host of its own, as a service on another machine does),
each copy under a trace ID of its own; the critical path is read from the REST API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hotspan.importer import OtlpHttpSink, import_paths
from hotspan.server import RunningServer
from testkit import serve_in_process

PUBLIC = Path(__file__).parent / "public"
SKEWS_US = (5_000, -5_000, 5_000_000, -5_000_000)
"""Extra clock offsets of one service, µs: 5 ms and 5 s either way."""
CASES = {
    # file: (service whose clock is moved, the service whose call it answers, its most on the critical path, ns)
    "zipkin__ascend.json": ("auth-service", "mobile-gateway", 4_157_000),
    "zipkin__skew.json": ("serviceb", "servicea", 93_577_000),
    "jaegerui__v3_getTrace-response.json": ("route", "frontend", 10 * 67_891_000),
}
"""Per capture: the skewed server's service, its caller's, and the most the server's spans can credit."""
HOTROD_ROOT_NS = 702_608_277
"""HotROD's root span (``frontend GET /dispatch``), ns: the request's window however the route clock is off."""


def _copy(path: Path, service: str, skew_us: int, trace_id: str) -> object:
    """``path``'s trace under ``trace_id`` with ``service``'s clock ``skew_us`` ahead: a Zipkin list, or an OTLP
    request in Jaeger's v3 envelope (whose skewed resource then names a host of its own)."""
    document = json.loads(path.read_text())
    if isinstance(document, list):
        for span in document:
            span["traceId"] = trace_id
            if span["localEndpoint"]["serviceName"] == service:
                span["timestamp"] += skew_us
        return document
    for resource in document["result"]["resourceSpans"]:
        attributes = {a["key"]: a["value"] for a in resource["resource"]["attributes"]}
        skewed = attributes["service.name"] == {"stringValue": service}
        if skewed:
            resource["resource"]["attributes"] = [
                {"key": key, "value": {"stringValue": f"{service}-host"} if key == "host.name" else value}
                for key, value in attributes.items()
            ]
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["traceId"] = trace_id
                moved = [span, *span.get("events", [])] if skewed else []
                for item in moved:
                    for key in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano"):
                        if key in item:
                            item[key] = str(int(item[key]) + skew_us * 1000)
    return document


@pytest.fixture(scope="module")
def server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("skew"), "skew")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def traces(server: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], str]:
    """(file, extra skew µs) -> trace ID, every copy imported."""
    folder = tmp_path_factory.mktemp("copies")
    found: dict[tuple[str, int], str] = {}
    for number, (file, (service, _, _)) in enumerate(CASES.items()):
        for offset, skew in enumerate((0, *SKEWS_US)):
            trace_id = f"{number + 1:016x}{offset + 1:016x}"
            copy = folder / f"{trace_id}.json"
            copy.write_text(json.dumps(_copy(PUBLIC / file, service, skew, trace_id)))
            found[file, skew] = trace_id
    summary = import_paths(sorted(folder.glob("*.json")), OtlpHttpSink(server.base_url), progress=False)
    assert summary.rejected == 0, summary.problems
    return found


def _by_service(server: RunningServer, trace_id: str) -> tuple[int, dict[str, int]]:
    answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}/critical-path", timeout=30)
    assert answer.status_code == 200, answer.text
    by_service: dict[str, int] = {}
    for section in answer.json()["sections"]:
        by_service[section["service_name"]] = by_service.get(section["service_name"], 0) + section["duration_ns"]
    return answer.json()["total_ns"], by_service


@pytest.mark.parametrize("file", list(CASES))
def test_a_skewed_server_is_credited_however_large_the_skew(
    server: RunningServer, traces: dict[tuple[str, int], str], file: str
) -> None:
    service, caller, most_ns = CASES[file]
    answers = {skew: _by_service(server, traces[file, skew]) for skew in (0, *SKEWS_US)}
    total, credited = answers[0]
    assert 0 < credited.get(service, 0) <= most_ns, credited
    if file.startswith("jaegerui"):
        assert total == HOTROD_ROOT_NS
    assert sum(credited.values()) == total and credited[caller] > 0
    # Moved into the middle of its client, the server lands where it does whatever the extra skew was.
    assert {skew: answer for skew, answer in answers.items()} == {skew: answers[0] for skew in answers}
