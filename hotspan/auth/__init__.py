"""Bearer-token auth and tenancy at Hotspan's edges: HTTP (ASGI middleware), OTLP/gRPC (interceptor), UI sessions.

Pieces, each pure and tested on its own:

- :mod:`~hotspan.auth.config`: the auth file (``HOTSPAN_AUTH_FILE``): hashed tokens → ``{tenant, roles}``;
- :mod:`~hotspan.auth.hashing`: ``sha256:`` / ``scrypt:`` hashes, constant-time checks, ``hotspan auth`` helpers;
- :mod:`~hotspan.auth.authenticator`: ``Authorization: Bearer`` (RFC 6750) → :class:`Principal`;
- :mod:`~hotspan.auth.policy`: the one table of which path needs which role (unlisted paths need ``admin``);
- :mod:`~hotspan.auth.middleware`: 401/403 before any route, the caller's tenancy into the ASGI scope;
- :mod:`~hotspan.auth.session`: the UI's signed HttpOnly session cookie;
- :mod:`~hotspan.auth.grpc_interceptor`: the same for OTLP/gRPC metadata;
- :mod:`~hotspan.auth.binding`: no tokens → loopback only;
- :mod:`~hotspan.auth.logs`: token redaction in request log lines.

The tenant flows from the token only: middleware → ``scope["hotspan.tenancy"]`` → ``api.tenancy.read_tenant``
/ ``dashboards.tenancy.read_tenant`` → the ``tenant=`` argument of every :class:`storage.reader.TraceReader`
read; interceptor → :data:`storage.tenancy.INGEST_TENANT` → the receiver's ingest call.

``/metrics`` needs ``admin`` until its handler renders only the caller's tenant's series (labelled ``tenant``);
then list it under ``query`` in :data:`hotspan.auth.policy.RULES`.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

import grpc
from fastapi import FastAPI

from hotspan.auth.authenticator import OPEN_PRINCIPAL, Authenticator, Principal
from hotspan.auth.binding import InsecureBindError, check_bind
from hotspan.auth.config import AuthFileError, Role
from hotspan.auth.grpc_interceptor import BearerTokenInterceptor
from hotspan.auth.middleware import AuthMiddleware
from hotspan.auth.openapi import document_security
from hotspan.auth.session import SessionCodec
from hotspan.settings import Settings

log = logging.getLogger(__name__)

__all__ = [
    "OPEN_PRINCIPAL",
    "Auth",
    "AuthFileError",
    "Authenticator",
    "InsecureBindError",
    "Principal",
    "Role",
    "check_bind",
    "load_auth",
    "protect_app",
]


@dataclass(frozen=True)
class Auth:
    """A process's auth: the token checker and the UI session signer."""

    authenticator: Authenticator
    sessions: SessionCodec

    def grpc_interceptors(self) -> list[grpc.ServerInterceptor]:
        """Interceptors for the OTLP/gRPC server (every method needs ``ingest``)."""
        return [BearerTokenInterceptor(self.authenticator, Role.INGEST)]


def load_auth(settings: Settings) -> Auth:
    """The auth of ``settings``: the auth file's tokens (open without one) and the session secret
    (``HOTSPAN_SESSION_SECRET``; without it a random one, so UI sessions end when the process restarts).

    Raises:
        AuthFileError: the auth file is missing or invalid.
    """
    authenticator = Authenticator.from_path(settings.auth_file)
    if settings.session_secret is not None:
        secret = settings.session_secret.get_secret_value().encode()
    else:
        secret = secrets.token_bytes(32)
        if authenticator.required:
            log.info("no HOTSPAN_SESSION_SECRET: UI sessions end when this process stops")
    if authenticator.required:
        log.info("auth: %d token(s) from %s", authenticator.token_count, settings.auth_file)
    return Auth(authenticator, SessionCodec(secret))


def protect_app(app: FastAPI, auth: Auth) -> None:
    """Put :class:`AuthMiddleware` in front of every route of ``app``, and document bearer auth in its OpenAPI
    description when tokens are required."""
    app.add_middleware(AuthMiddleware, authenticator=auth.authenticator, sessions=auth.sessions)
    if not auth.authenticator.required:
        return
    build_schema = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_security(build_schema())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
