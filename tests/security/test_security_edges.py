"""Auth at Hotspan's edges, against a served instance: 401/403 in each API's own error shape with RFC 6750
challenges, the UI's sign-in and session cookie, OTLP/gRPC metadata, and refusing to serve beyond loopback
without tokens."""

from __future__ import annotations

import json
import uuid
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from security_support import (
    ACME_INGEST,
    ACME_QUERY,
    ADMIN,
    BETA_QUERY,
    EVERYTHING,
    export_body,
    span,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from collector.otlp_json import request_from_json
from hotspan.auth import Authenticator, InsecureBindError
from hotspan.auth.config import AuthFile, Role, TokenEntry
from hotspan.auth.grpc_interceptor import BearerTokenInterceptor
from hotspan.auth.hashing import hash_token
from hotspan.auth.middleware import AuthMiddleware
from hotspan.auth.session import COOKIE_NAME, SessionCodec
from hotspan.cli import main
from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings
from storage.tenancy import INGEST_TENANT, SCOPE_KEY, Tenancy

OTLP_JSON = {"content-type": "application/json"}


def _get(server: RunningServer, path: str, headers: dict[str, str] | None = None, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.base_url}{path}", headers=headers or {}, params=params, timeout=30)


def _challenge(response: httpx.Response) -> str:
    return response.headers.get("www-authenticate", "")


@pytest.mark.parametrize(
    ("path", "body_check"),
    [
        ("/api/v1/services", lambda b: b["error"]["code"] == "unauthorized"),
        ("/api/services", lambda b: b["data"] is None and b["errors"][0]["code"] == 401),
        ("/api/v3/services", lambda b: b["error"]["httpCode"] == 401),
        ("/ui/_dash-layout", lambda b: b["error"]["code"] == "unauthorized"),
    ],
)
def test_missing_token_is_401_in_each_apis_shape(secured_server: RunningServer, path: str, body_check: Any) -> None:
    answer = _get(secured_server, path)
    assert answer.status_code == 401
    assert _challenge(answer) == 'Bearer realm="hotspan"'  # RFC 6750 §3.1: no error details without credentials
    assert body_check(answer.json())


@pytest.mark.parametrize("header", ["Bearer hsp_not-a-real-token", "Basic YTpi", "Bearer", ACME_QUERY.secret])
def test_bad_credentials_are_401_invalid(secured_server: RunningServer, header: str) -> None:
    answer = _get(secured_server, "/api/v1/services", {"authorization": header})
    assert answer.status_code == 401
    assert 'error="invalid_' in _challenge(answer)


def test_otlp_ingest_without_a_token_is_a_non_retryable_401_status(secured_server: RunningServer) -> None:
    body = json.dumps(export_body("nobody", span("1" * 32, "1" * 16, "", "x", 0)))
    answer = httpx.post(f"{secured_server.base_url}/v1/traces", content=body, headers=OTLP_JSON)
    assert answer.status_code == 401  # OTLP/HTTP retries only 429, 502, 503, 504
    assert answer.json()["code"] == 16  # google.rpc.Code.UNAUTHENTICATED
    protobuf = httpx.post(
        f"{secured_server.base_url}/v1/traces", content=b"", headers={"content-type": "application/x-protobuf"}
    )
    assert protobuf.status_code == 401
    assert status_pb2.Status.FromString(protobuf.content).code == 16


@pytest.mark.parametrize(
    ("method", "path", "token"),
    [
        ("POST", "/v1/traces", ACME_QUERY),  # a query token cannot write
        ("POST", "/v1/traces", ADMIN),  # nor can an admin one: admin is about reading
        ("GET", "/api/v1/services", ACME_INGEST),  # an ingest token cannot read
        ("GET", "/api/services", ACME_INGEST),
        ("GET", "/api/v3/services", ACME_INGEST),
        ("GET", "/metrics", ACME_QUERY),  # /metrics is admin-only until it filters by tenant
        ("GET", "/not-yet-a-route", ACME_QUERY),  # unlisted paths need admin
    ],
)
def test_wrong_role_is_403(secured_server: RunningServer, method: str, path: str, token: Any) -> None:
    url = f"{secured_server.base_url}{path}"
    answer = httpx.request(method, url, headers={**token.header, **OTLP_JSON}, timeout=30)
    assert answer.status_code == 403
    assert 'error="insufficient_scope"' in _challenge(answer)


def test_admin_reads_metrics(secured_server: RunningServer) -> None:
    assert _get(secured_server, "/metrics", ADMIN.header).status_code == 200


def test_public_paths_need_no_token(secured_server: RunningServer) -> None:
    assert _get(secured_server, "/healthz").status_code == 200
    spec = _get(secured_server, "/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    search = spec["paths"]["/api/v1/traces"]["get"]
    assert search["security"] == [{"bearerAuth": []}]
    assert {"401", "403"} <= set(search["responses"])
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_the_tenant_never_comes_from_query_parameters(secured_server: RunningServer) -> None:
    for params in ({"tenant": "beta"}, {"all_tenants": "true"}, {"tenant": ""}):
        answer = _get(secured_server, "/api/v1/services", ACME_QUERY.header, **params)
        assert answer.json()["services"] == ["acme-gateway", "acme-llm"]


def test_ui_requires_a_session_and_offers_a_sign_in_form(secured_server: RunningServer) -> None:
    page = _get(secured_server, "/ui/", {"accept": "text/html"})
    assert page.status_code == 401
    assert 'action="/auth/login"' in page.text and 'type="password"' in page.text


def test_ui_token_parameter_is_exchanged_for_an_httponly_session(secured_server: RunningServer) -> None:
    with httpx.Client(base_url=secured_server.base_url, timeout=30) as client:
        answer = client.get("/ui/trace/abc", params={"token": BETA_QUERY.secret, "x": "1"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/trace/abc?x=1"  # the token leaves the address bar
        cookie = answer.headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=Lax", "Path=/ui"):
            assert attribute in cookie
        assert BETA_QUERY.secret not in cookie
        assert client.get("/ui/", headers={"accept": "text/html"}).status_code == 200
        # The session is for the UI only: the API takes bearer tokens.
        session = client.cookies[COOKIE_NAME]
        api = httpx.get(f"{secured_server.base_url}/api/v1/services", headers={"cookie": f"{COOKIE_NAME}={session}"})
        assert api.status_code == 401
        logout = client.get("/auth/logout")
        assert logout.status_code == 303 and "Max-Age=0" in logout.headers["set-cookie"]


@pytest.mark.parametrize(("token", "status"), [(ACME_INGEST.secret, 403), ("hsp_wrong", 401)])
def test_ui_token_parameter_needs_a_valid_query_token(secured_server: RunningServer, token: str, status: int) -> None:
    answer = _get(secured_server, "/ui/", params=None, token=token)
    assert answer.status_code == status
    assert "set-cookie" not in answer.headers


def test_sign_in_form(secured_server: RunningServer) -> None:
    with httpx.Client(base_url=secured_server.base_url, timeout=30) as client:
        assert client.get("/auth/login").status_code == 200
        wrong = client.post("/auth/login", data={"token": "hsp_wrong", "next": "/ui/trace/x"})
        assert wrong.status_code == 401 and "not valid" in wrong.text
        right = client.post("/auth/login", data={"token": ACME_QUERY.secret, "next": "/ui/trace/x"})
        assert right.status_code == 303 and right.headers["location"] == "/ui/trace/x"
        assert client.get("/ui/", headers={"accept": "text/html"}).status_code == 200


def test_sign_in_refuses_a_post_from_another_site(secured_server: RunningServer) -> None:
    answer = httpx.post(
        f"{secured_server.base_url}/auth/login",
        data={"token": ACME_QUERY.secret},
        headers={"origin": "https://evil.example"},
        timeout=30,
    )
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert answer.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/ui", "/ui/../api", "/\\evil", "/api/v1"])
def test_sign_in_never_redirects_off_the_ui(secured_server: RunningServer, target: str) -> None:
    answer = httpx.post(
        f"{secured_server.base_url}/auth/login", data={"token": ACME_QUERY.secret, "next": target}, timeout=30
    )
    assert answer.status_code == 303
    assert answer.headers["location"] in ("/ui/", target) and answer.headers["location"].startswith("/ui")


def test_a_forged_or_foreign_session_is_refused(secured_server: RunningServer) -> None:
    forged = SessionCodec(b"x" * 32).issue("0123456789abcdef")
    answer = httpx.get(f"{secured_server.base_url}/ui/_dash-layout", cookies={COOKIE_NAME: forged}, timeout=30)
    assert answer.status_code == 401 and 'error="invalid_token"' in _challenge(answer)


def test_middleware_hands_the_tenancy_down_and_the_header_not() -> None:
    seen: dict[str, Any] = {}

    async def echo(request: Request) -> JSONResponse:
        seen["tenancy"] = request.scope[SCOPE_KEY]
        seen["headers"] = [k for k, _ in request.scope["headers"]]
        return JSONResponse({})

    entries = (
        TokenEntry(name="a", hash=hash_token("tok-a"), tenant="acme", roles=frozenset({Role.QUERY})),
        TokenEntry(name="o", hash=hash_token("tok-o"), tenant="ops", roles=frozenset({Role.ADMIN})),
    )
    app = AuthMiddleware(
        Starlette(routes=[Route("/api/echo", echo)]), Authenticator(AuthFile(tokens=entries)), SessionCodec(b"k" * 32)
    )
    client = TestClient(app)
    assert client.get("/api/echo", headers={"authorization": "Bearer tok-a"}).status_code == 200
    assert seen["tenancy"] == Tenancy("acme") and b"authorization" not in seen["headers"]
    assert client.get("/api/echo", headers={"authorization": "Bearer tok-o"}).status_code == 200
    assert seen["tenancy"] == Tenancy("ops", all_tenants=True) and seen["tenancy"].read_tenant is None


def _grpc_export(server: RunningServer, metadata: tuple[tuple[str, str], ...]) -> grpc.RpcError | None:
    request, _ = request_from_json(export_body("grpc-auth-check", span(uuid.uuid4().hex, "2" * 16, "", "x", 0)))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        try:
            stub.Export(
                trace_service_pb2.ExportTraceServiceRequest.FromString(request.SerializeToString()),
                metadata=metadata,
                timeout=10,
            )
        except grpc.RpcError as exc:
            return exc
    return None


def test_grpc_ingest_needs_an_ingest_token(secured_server: RunningServer) -> None:
    missing = _grpc_export(secured_server, ())
    assert missing is not None and missing.code() == grpc.StatusCode.UNAUTHENTICATED
    wrong = _grpc_export(secured_server, (("authorization", "Bearer hsp_wrong"),))
    assert wrong is not None and wrong.code() == grpc.StatusCode.UNAUTHENTICATED
    query = _grpc_export(secured_server, (("authorization", f"Bearer {ACME_QUERY.secret}"),))
    assert query is not None and query.code() == grpc.StatusCode.PERMISSION_DENIED
    assert _grpc_export(secured_server, (("authorization", f"Bearer {EVERYTHING.secret}"),)) is None


def test_grpc_interceptor_runs_the_call_as_the_tokens_tenant() -> None:
    entry = TokenEntry(name="i", hash=hash_token("tok-i"), tenant="acme", roles=frozenset({Role.INGEST}))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2),
        interceptors=[BearerTokenInterceptor(Authenticator(AuthFile(tokens=(entry,))))],
    )
    handler = grpc.unary_unary_rpc_method_handler(lambda _request, _context: INGEST_TENANT.get().encode())
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", {"Who": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/t.T/Who")
            assert call(b"", metadata=(("authorization", "Bearer tok-i"),), timeout=10) == b"acme"
            with pytest.raises(grpc.RpcError) as caught:
                call(b"", timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.stop(0)
    assert INGEST_TENANT.get() == "default"  # reset after each call


def test_refuses_to_serve_beyond_loopback_without_tokens(chdb_dsn: str, tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path, clickhouse_dsn=chdb_dsn, clickhouse_database="never_opened", host="0.0.0.0", http_port=0
    )
    with pytest.raises(InsecureBindError, match="HOTSPAN_AUTH_FILE"):
        start_server(settings)
    assert not (tmp_path / "ingest").exists()  # refused before anything was opened


def test_serve_command_explains_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.delenv("HOTSPAN_AUTH_FILE", raising=False)
    status = main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path), "--http-port", "0", "--grpc-port", "-1"])
    assert status == 2
    message = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in message and "HOTSPAN_AUTH_FILE" in message
