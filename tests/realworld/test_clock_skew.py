"""Clock skew in real Zipkin captures, served: a server whose clock is off is moved into the client that called it,
whatever the size of the skew, so the critical path credits its work (found by a fresh user's sweep: zipkin-lens's
``ascend.json``, where the auth service's half of a shared span starts 5.1 ms after the gateway's half ended, gave
the auth service 0 ms and the gateway's call 14 ms of network, while the same trace skewed by 5 s more was right).

Each capture (``public/``: zipkin-lens's ``ascend.json`` and ``skew.json``) goes through ``hotspan import``'s path
to a served Hotspan over OTLP/HTTP, as is and with one service's clock moved by the amounts of :data:`SKEWS`, each
copy under a trace ID of its own; the critical path is read from the REST API.
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
SKEWS_US = (5_000, 5_000_000, -5_000_000)
"""Extra clock offsets of one service, µs (Zipkin's unit): a few ms, and 5 s either way."""
CASES = {
    # file: (service whose clock is moved, the service whose call it answers, its work on the critical path, µs)
    "zipkin__ascend.json": ("auth-service", "mobile-gateway", 4_157),
    "zipkin__skew.json": ("serviceb", "servicea", 93_577),
}
"""Per capture: the skewed server's service, its caller's, and the server span's length (the most it can credit)."""


def _copy(path: Path, service: str, skew_us: int, trace_id: str) -> list[dict]:
    spans = json.loads(path.read_text())
    for span in spans:
        span["traceId"] = trace_id
        if span["localEndpoint"]["serviceName"] == service:
            span["timestamp"] += skew_us
    return spans


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
            trace_id = f"{number + 1:08x}{offset + 1:08x}"
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
    service, caller, length_us = CASES[file]
    answers = {skew: _by_service(server, traces[file, skew]) for skew in (0, *SKEWS_US)}
    total, credited = answers[0]
    assert 0 < credited.get(service, 0) <= length_us * 1000, credited
    assert sum(credited.values()) == total and credited[caller] > 0
    # Moved into the middle of its client, the server lands where it does whatever the extra skew was.
    assert {skew: answer for skew, answer in answers.items()} == {skew: answers[0] for skew in answers}
