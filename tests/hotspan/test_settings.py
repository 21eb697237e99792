"""Settings reach the components built from them (``hotspan.settings``, ``hotspan.app``): a variable set in the
environment is the value each component runs with, and a component's default is the setting's."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from api.trace_limits import TraceReadLimits
from hotspan.app import engine_metrics
from hotspan.cli import main
from hotspan.settings import ENVIRONMENT, load_settings
from processors.pipeline.config import TracePipelineConfig
from query.trace_view_cache import TraceViews
from storage.reader import MAX_TRACE_SPANS


def test_the_largest_trace_is_one_default_for_every_reader(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    assert settings.max_trace_spans == MAX_TRACE_SPANS
    assert TracePipelineConfig().max_trace_spans == MAX_TRACE_SPANS
    assert TraceReadLimits().max_spans == MAX_TRACE_SPANS
    assert inspect.signature(TraceViews).parameters["max_read_spans"].default == MAX_TRACE_SPANS


def test_the_prometheus_timeout_reaches_the_services_page_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENVIRONMENT["prometheus_url"], "http://127.0.0.1:9")
    monkeypatch.setenv(ENVIRONMENT["prometheus_timeout_s"], "0.75")
    reader = engine_metrics(load_settings(data_dir=tmp_path))
    assert reader is not None and reader.timeout_s == 0.75


def test_without_a_prometheus_url_the_services_page_has_no_engine_metrics(tmp_path: Path) -> None:
    assert engine_metrics(load_settings(data_dir=tmp_path)) is None


class _Receiver(BaseHTTPRequestHandler):
    """Answers every OTLP/JSON export with an empty success and keeps each request's ``Authorization``."""

    seen: list[str | None]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.seen.append(self.headers.get("authorization"))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads what was sent, not the access log."""


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str | None]]]:
    """A stand-in OTLP/HTTP endpoint (its URL) and the ``Authorization`` headers it received."""
    seen: list[str | None] = []
    handler = type("Handler", (_Receiver,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_import_sends_the_token_of_the_settings(
    receiver: tuple[str, list[str | None]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = receiver
    trace = tmp_path / "trace.json"
    trace.write_text(
        '{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},'
        ' "scopeSpans": [{"spans": [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",'
        ' "name": "GET /", "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000001000000"}]}]}]}',
        encoding="utf-8",
    )
    monkeypatch.setenv(ENVIRONMENT["token"], "hsp_settings-test-token")
    assert main(["import", "--no-progress", "--data-dir", str(tmp_path), "--endpoint", url, str(trace)]) == 0
    assert seen == ["Bearer hsp_settings-test-token"]
