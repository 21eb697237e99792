"""gRPC server interceptor: bearer tokens in call metadata for OTLP/gRPC.

Senders put ``authorization: Bearer <token>`` in the call metadata (the OTel SDK's
``OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>``). A call without a valid token ends with
``UNAUTHENTICATED``, one whose token lacks the role with ``PERMISSION_DENIED``; OTLP exporters retry neither
(OTLP specification, "OTLP/gRPC Response": only transient codes are retryable). An admitted call runs with
:data:`storage.tenancy.INGEST_TENANT` set to the token's tenant, which the receiver stores the spans under.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from hotspan.auth.authenticator import Authenticator, CredentialError, bearer_token
from hotspan.auth.config import Role
from storage.tenancy import INGEST_TENANT

log = logging.getLogger(__name__)


class BearerTokenInterceptor(grpc.ServerInterceptor):
    """Admits a call whose ``authorization`` metadata holds a token with ``role``.

    Args:
        authenticator: checks tokens; when open, every call is admitted as the default tenant.
        role: the role every method of the server needs.
    """

    def __init__(self, authenticator: Authenticator, role: Role = Role.INGEST) -> None:
        self._authenticator = authenticator
        self._role = role

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        values = [
            value if isinstance(value, str) else value.decode("latin-1")
            for key, value in handler_call_details.invocation_metadata or ()
            if key.lower() == "authorization"
        ]
        try:
            principal = self._authenticator.authenticate(bearer_token(values) if self._authenticator.required else "")
        except CredentialError as exc:
            log.info("denied gRPC %s: %s", handler_call_details.method, exc.message)
            return _refusal(handler, grpc.StatusCode.UNAUTHENTICATED, exc.message)
        if not principal.allows(self._role):
            log.info(
                "denied gRPC %s to token %r: needs role %s", handler_call_details.method, principal.name, self._role
            )
            return _refusal(handler, grpc.StatusCode.PERMISSION_DENIED, f"this token lacks the {self._role} role")
        return _with_tenant(handler, principal.tenant)


def _with_tenant(handler: grpc.RpcMethodHandler, tenant: str) -> grpc.RpcMethodHandler:
    """``handler`` whose behaviour runs with :data:`INGEST_TENANT` set to ``tenant``."""

    def wrap(behaviour: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if behaviour is None:
            return None

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            reset = INGEST_TENANT.set(tenant)
            try:
                return behaviour(request, context)
            finally:
                INGEST_TENANT.reset(reset)

        return call

    return handler._replace(  # type: ignore[attr-defined]
        unary_unary=wrap(handler.unary_unary),
        unary_stream=wrap(handler.unary_stream),
        stream_unary=wrap(handler.stream_unary),
        stream_stream=wrap(handler.stream_stream),
    )


def _refusal(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that aborts every call with ``code``."""

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(code, message)

    return handler._replace(  # type: ignore[attr-defined]
        unary_unary=refuse if handler.unary_unary else None,
        unary_stream=refuse if handler.unary_stream else None,
        stream_unary=refuse if handler.stream_unary else None,
        stream_stream=refuse if handler.stream_stream else None,
    )
