"""No token reaches a log line: every logger of the process captured at DEBUG, uvicorn's access log included,
while tokens travel every way they can (bearer headers on every API, OTLP/HTTP and gRPC ingest, the UI's
``?token=`` exchange and sign-in form) and fail every way they can (unknown, wrong role, malformed)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from security_support import ACME_INGEST, ACME_QUERY, ADMIN, BETA_QUERY, TOKENS, export_body, span

from collector.otlp_json import request_from_json
from hotspan.server import RunningServer

WRONG = "hsp_wrong-token-that-must-not-be-logged-0123456789"
CLIENT_LOGGERS = ("httpx", "httpcore")
"""The test's own HTTP client logs the URLs it requests; those lines are the client's, not Hotspan's."""


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.names: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(CLIENT_LOGGERS):
            return
        self.names.add(record.name)
        self.lines.append(f"{record.name} {record.getMessage()} {record.exc_text or ''}")
        if record.exc_info:
            self.lines.append(logging.Formatter().formatException(record.exc_info))


@pytest.fixture
def captured() -> Iterator[_Collect]:
    """Every record of the process at DEBUG, from the root and from uvicorn's loggers (which do not propagate)."""
    handler = _Collect()
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.access", "uvicorn.error")]
    saved = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler
    for logger, level in saved:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _traffic(server: RunningServer) -> None:
    """Tokens every way they travel, and fail."""
    body = json.dumps(export_body("log-check", span(uuid.uuid4().hex, "5" * 16, "", "x", 0)))
    json_headers = {"content-type": "application/json"}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        assert (
            client.post("/v1/traces", content=body, headers={**ACME_INGEST.header, **json_headers}).status_code == 200
        )
        client.post("/v1/traces", content=body, headers={**ACME_QUERY.header, **json_headers})  # 403
        for path in ("/api/v1/services", "/api/services", "/api/v3/services", "/api/dependencies", "/api/traces"):
            client.get(path, headers=ACME_QUERY.header)
            client.get(path, headers={"authorization": f"Bearer {WRONG}"})
        client.get("/api/v1/traces/not-an-id", headers=BETA_QUERY.header)
        client.get("/metrics", headers=ADMIN.header)
        client.get("/metrics", headers=BETA_QUERY.header)  # 403
        client.get("/api/v1/services", params={"access_token": ACME_QUERY.secret}, headers=ACME_QUERY.header)
        client.get("/ui/", params={"token": ACME_QUERY.secret, "x": "1"})
        client.get("/ui/", params={"token": WRONG})
        client.post("/auth/login", data={"token": BETA_QUERY.secret, "next": "/ui/"})
        client.post("/auth/login", data={"token": WRONG})
        client.get("/api/v1/services", headers={"authorization": f"Basic {WRONG}"})
    request, _ = request_from_json(export_body("log-check-grpc", span(uuid.uuid4().hex, "6" * 16, "", "x", 0)))
    message = trace_service_pb2.ExportTraceServiceRequest.FromString(request.SerializeToString())
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        stub.Export(message, metadata=(("authorization", f"Bearer {ACME_INGEST.secret}"),), timeout=10)
        for token in (WRONG, ACME_QUERY.secret):
            with pytest.raises(grpc.RpcError):
                stub.Export(message, metadata=(("authorization", f"Bearer {token}"),), timeout=10)


def test_tokens_never_reach_the_logs(secured_server: RunningServer, captured: _Collect) -> None:
    _traffic(secured_server)
    text = "\n".join(captured.lines)
    assert "uvicorn.access" in captured.names, "the access log was not captured, so the test proves nothing"
    assert "/ui/?x=1" in text or "token=[redacted]" in text
    for secret in [t.secret for t in TOKENS] + [WRONG]:
        assert secret not in text
