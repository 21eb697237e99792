"""ASGI middleware: authenticate every HTTP request before any route runs, and hand routes the caller's tenancy.

Per request (paths and roles: :mod:`hotspan.auth.policy`):

1. a public path passes untouched;
2. credentials: ``Authorization: Bearer <token>`` (RFC 6750 §2.1) anywhere; under ``/ui`` also the session
   cookie (:mod:`hotspan.auth.session`), and ``GET /ui/...?token=<token>``, which is exchanged for a session
   cookie and redirected to the same URL without the token;
3. none or unknown → **401** with ``WWW-Authenticate: Bearer realm="hotspan"`` (plus ``error="invalid_token"``
   for a bad one, RFC 6750 §3); a known token without the path's role → **403** with
   ``error="insufficient_scope"``. Bodies use each API's own error shape (OTLP ``google.rpc.Status``, Jaeger v1
   and v3 envelopes, Hotspan's ``{"error": ...}``); OTLP exporters do not retry a 401 or 403;
4. success: the scope gets the caller's :class:`storage.tenancy.Tenancy` (:data:`storage.tenancy.SCOPE_KEY`)
   and principal (:data:`PRINCIPAL_KEY`); the ``Authorization`` header is removed from the scope so nothing
   downstream can log it.

``/auth/login`` serves a sign-in form (``POST`` it the token) and ``/auth/logout`` ends the session. Without an
auth file every request acts as :data:`hotspan.auth.authenticator.OPEN_PRINCIPAL`.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from api.errors import error_response
from api.jaeger.errors import v1_error, v3_error
from api.tempo.errors import tempo_error
from hotspan.auth.authenticator import OPEN_PRINCIPAL, Authenticator, CredentialError, Principal, bearer_token
from hotspan.auth.config import Role
from hotspan.auth.policy import LOGIN_PATH, LOGOUT_PATH, UI_PREFIX, required_role, under
from hotspan.auth.session import COOKIE_NAME, SessionCodec, set_cookie_header
from storage.tenancy import SCOPE_KEY

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PRINCIPAL_KEY = "hotspan.principal"
"""ASGI scope key of the authenticated :class:`~hotspan.auth.authenticator.Principal`."""

TOKEN_PARAMETER = "token"
"""Query parameter of the one-time token → session exchange under ``/ui``."""

REALM = "hotspan"
MAX_LOGIN_BODY_BYTES = 8 * 1024
_PROTOBUF = "application/x-protobuf"


class AuthMiddleware:
    """See the module docstring.

    Args:
        app: the application it guards.
        authenticator: checks tokens (open when no auth file is configured).
        sessions: signs UI session cookies.
    """

    def __init__(self, app: ASGIApp, authenticator: Authenticator, sessions: SessionCodec) -> None:
        self.app = app
        self.authenticator = authenticator
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == LOGIN_PATH:
            await self._login(scope, receive, send)
            return
        if path == LOGOUT_PATH:
            await _logout(scope, receive, send)
            return
        role = required_role(path)
        if role is None:
            await self.app(scope, receive, send)
            return
        if not self.authenticator.required:
            _admit(scope, OPEN_PRINCIPAL)
            await self.app(scope, receive, send)
            return
        if under(path, UI_PREFIX) and _query_value(scope, TOKEN_PARAMETER) is not None:
            await self._exchange(scope, receive, send)
            return
        try:
            principal = self._principal(scope)
        except CredentialError as exc:
            log.info("denied %s %s: %s", scope.get("method", "WEBSOCKET"), path, exc.message)
            await _unauthorized(scope, exc)(scope, receive, send)
            return
        if not principal.allows(role):
            log.info("denied %s %s to token %r: needs role %s", scope.get("method", ""), path, principal.name, role)
            await _forbidden(scope, role)(scope, receive, send)
            return
        _admit(scope, principal)
        await self.app(scope, receive, send)

    def _principal(self, scope: Scope) -> Principal:
        """The caller of a request, from its bearer token or (under ``/ui``) its session cookie.

        Raises:
            CredentialError: missing, malformed or unknown credentials.
        """
        headers = _header_values(scope, b"authorization")
        if headers or not under(scope["path"], UI_PREFIX):
            return self.authenticator.authenticate(bearer_token(headers))
        cookie = _cookie(scope, COOKIE_NAME)
        if cookie is None:
            raise CredentialError("", "sign in at /auth/login or send a bearer token")
        entry_id = self.sessions.entry_id(cookie)
        principal = self.authenticator.principal_for_entry(entry_id) if entry_id else None
        if principal is None:
            raise CredentialError("invalid_token", "the session has expired or its token was revoked; sign in again")
        return principal

    async def _exchange(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/ui/...?token=``: a session cookie for a query token, and the same URL without the token."""
        token = _query_value(scope, TOKEN_PARAMETER) or ""
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        remaining = [(k, v) for k, v in query if k != TOKEN_PARAMETER]
        # The access log reads the scope's query string after the response: keep the token out of it.
        scope["query_string"] = urlencode(remaining).encode("latin-1")
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await _unauthorized(scope, CredentialError("invalid_request", "send ?token= with GET only"))(
                scope, receive, send
            )
            return
        try:
            principal = self.authenticator.authenticate(token)
        except CredentialError as exc:
            log.info("denied UI sign-in by ?token=: %s", exc.message)
            await _login_page(401, "That token is not valid.", _location(scope))(scope, receive, send)
            return
        if not principal.allows(Role.QUERY):
            await _login_page(403, "That token may not read traces (it lacks the query role).", _location(scope))(
                scope, receive, send
            )
            return
        await self._start_session(scope, principal, _location(scope))(scope, receive, send)

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET /auth/login``: the form; ``POST`` (form field ``token``): a session, then ``next``."""
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        target = _safe_next(_query_value(scope, "next"))
        if not self.authenticator.required:
            await RedirectResponse(target, status_code=303)(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _login_page(200, "", target)(scope, receive, send)
            return
        if not _same_origin(scope):
            # Another site posting its own token here would sign the victim in to that site's tenant.
            await _login_page(403, "Sign in from Hotspan's own page.", target)(scope, receive, send)
            return
        body = await _read_body(receive, MAX_LOGIN_BODY_BYTES)
        if body is None:
            await _login_page(413, "The form is too large.", target)(scope, receive, send)
            return
        form = dict(parse_qsl(body.decode("utf-8", "replace")))
        target = _safe_next(form.get("next"))
        try:
            principal = self.authenticator.authenticate(bearer_token([f"Bearer {form.get('token', '').strip()}"]))
        except CredentialError as exc:
            log.info("denied UI sign-in: %s", exc.message)
            await _login_page(401, "That token is not valid.", target)(scope, receive, send)
            return
        if not principal.allows(Role.QUERY):
            await _login_page(403, "That token may not read traces (it lacks the query role).", target)(
                scope, receive, send
            )
            return
        log.info("UI sign-in by token %r (tenant %s)", principal.name, principal.tenant)
        await self._start_session(scope, principal, target)(scope, receive, send)

    def _start_session(self, scope: Scope, principal: Principal, target: str) -> Response:
        response = RedirectResponse(target, status_code=303)
        cookie = self.sessions.issue(principal.entry_id)
        response.headers.append("set-cookie", set_cookie_header(cookie, self.sessions.ttl_s, _is_https(scope)))
        response.headers["cache-control"] = "no-store"
        return response


def _admit(scope: Scope, principal: Principal) -> None:
    """Record the caller in the scope, and drop its Authorization header from it."""
    scope[SCOPE_KEY] = principal.tenancy
    scope[PRINCIPAL_KEY] = principal
    scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]


async def _logout(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        await send({"type": "websocket.close", "code": 1008})
        return
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.headers.append("set-cookie", set_cookie_header("", 0, _is_https(scope)))
    await response(scope, receive, send)


def _challenge(error: str, description: str = "", scope_name: str = "") -> str:
    """A ``WWW-Authenticate`` value (RFC 6750 §3); descriptions are fixed texts without quotes."""
    parts = [f'Bearer realm="{REALM}"']
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    if scope_name:
        parts.append(f'scope="{scope_name}"')
    return ", ".join(parts)


def _unauthorized(scope: Scope, exc: CredentialError) -> Response | _WebSocketDenial:
    if scope["type"] == "websocket":
        return _WebSocketDenial()
    if under(scope["path"], UI_PREFIX) and _wants_html(scope):
        response: Response = _login_page(401, "" if not exc.error else exc.message, _location(scope))
    else:
        response = _error_body(scope, 401, exc.message)
    # RFC 6750 §3.1: a request without credentials gets the bare challenge, no error details.
    response.headers["www-authenticate"] = _challenge(exc.error, exc.message if exc.error else "")
    return response


def _forbidden(scope: Scope, role: Role) -> Response | _WebSocketDenial:
    if scope["type"] == "websocket":
        return _WebSocketDenial()
    message = f"this token lacks the {role} role"
    response = _error_body(scope, 403, message)
    response.headers["www-authenticate"] = _challenge("insufficient_scope", message, str(role))
    return response


def _error_body(scope: Scope, status: int, message: str) -> Response:
    """An error in the shape the API under the request's path answers errors in."""
    path = scope["path"]
    if under(path, "/v1/traces"):
        code = code_pb2.UNAUTHENTICATED if status == 401 else code_pb2.PERMISSION_DENIED
        rpc_status = status_pb2.Status(code=code, message=message)
        content_type = next(iter(_header_values(scope, b"content-type")), "")
        if content_type.lower().startswith(_PROTOBUF):
            return Response(rpc_status.SerializeToString(), status_code=status, media_type=_PROTOBUF)
        return Response(json_format.MessageToJson(rpc_status, indent=None), status, media_type="application/json")
    if under(path, "/api/v3"):
        return v3_error(status, message)
    if under(path, "/tempo"):
        return tempo_error(status, message)
    if under(path, "/api") and not under(path, "/api/v1"):
        return v1_error(status, message)
    response: JSONResponse = error_response(status, "unauthorized" if status == 401 else "forbidden", message)
    return response


class _WebSocketDenial:
    """Refuses a WebSocket handshake (close code 1008, policy violation)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "websocket.close", "code": 1008})


_LOGIN_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · Hotspan</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,sans-serif;background:#f6f7f9;display:flex;justify-content:center;padding-top:12vh}}
form{{background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002;min-width:22rem}}
input[type=password]{{width:100%;padding:.5rem;margin:.5rem 0 1rem;box-sizing:border-box}}
.error{{color:#b00020}}
</style></head>
<body><form method="post" action="{action}">
<h1>Hotspan</h1>
<p class="error" id="login-error">{error}</p>
<label for="token">Access token</label>
<input type="password" id="token" name="token" autocomplete="off" required autofocus>
<input type="hidden" name="next" value="{next}">
<button type="submit" id="login-submit">Sign in</button>
</form></body></html>
"""


def _login_page(status: int, error: str, target: str) -> HTMLResponse:
    """The sign-in form, posting to ``/auth/login`` and then going to ``target``."""
    body = _LOGIN_HTML.format(action=LOGIN_PATH, error=html.escape(error), next=html.escape(_safe_next(target)))
    # Never framed (clickjacking of the token field), never cached.
    headers = {
        "cache-control": "no-store",
        "x-frame-options": "DENY",
        "content-security-policy": "frame-ancestors 'none'",
    }
    return HTMLResponse(body, status_code=status, headers=headers)


def _same_origin(scope: Scope) -> bool:
    """Whether a request's ``Origin`` (sent by browsers with form posts) names this server; no ``Origin``
    (a non-browser client) passes."""
    origins = _header_values(scope, b"origin")
    if not origins:
        return True
    host = next(iter(_header_values(scope, b"host")), "")
    return urlsplit(origins[0]).netloc.lower() == host.lower()


def _safe_next(target: str | None) -> str:
    """``target`` if it is a path under ``/ui`` of this server (never an open redirect), else ``/ui/``."""
    if target and under(target.split("?", 1)[0], UI_PREFIX) and "//" not in target and "\\" not in target:
        return target
    return UI_PREFIX + "/"


def _location(scope: Scope) -> str:
    """The request's path and query (as the scope now holds it), for redirects back to it."""
    location = quote(scope.get("root_path", "") + scope["path"], safe="/")
    return f"{location}?{scope['query_string'].decode('latin-1')}" if scope["query_string"] else location


def _header_values(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope["headers"] if key.lower() == name]


def _cookie(scope: Scope, name: str) -> str | None:
    for header in _header_values(scope, b"cookie"):
        for pair in header.split(";"):
            key, _, value = pair.strip().partition("=")
            if key == name:
                return value
    return None


def _query_value(scope: Scope, name: str) -> str | None:
    for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
        if key == name:
            return value
    return None


def _wants_html(scope: Scope) -> bool:
    return scope.get("method") in ("GET", "HEAD") and any("text/html" in v for v in _header_values(scope, b"accept"))


def _is_https(scope: Scope) -> bool:
    return scope.get("scheme") == "https"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or ``None`` once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
