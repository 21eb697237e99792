"""Errors of the Jaeger-compatible routes, answered in the envelopes Jaeger's own clients parse.

The app-wide handlers (``api.errors``) answer ``{"error": {"code", "message"}}``; Jaeger clients expect their
own shapes instead, so the Jaeger routers use route classes that turn every failure into:

- API v1 (``/api/...``, Jaeger's ``structuredResponse``):
  ``{"data": null, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": 400, "msg": "..."}]}``;
- API v3 (``/api/v3/...``, Jaeger's ``GRPCGatewayError``): ``{"error": {"httpCode": 400, "message": "..."}}``;

each with the same HTTP status. Bad input (an unparsable parameter, a validation failure) is a 400; a read over a
budget is a 400, 413 or 503 (``api.read_pool``, with ``Retry-After`` on a 503); another storage failure is a 500
whose message names no SQL (the cause goes to the log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from api.errors import ApiError, limit_error
from query.store import ReadLimitError

log = logging.getLogger(__name__)


class JaegerError(Exception):
    """A request the Jaeger API refuses: HTTP ``status`` and a message that names the parameter."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def v1_error(status: int, message: str) -> JSONResponse:
    """Jaeger API v1's error envelope with HTTP ``status``."""
    body = {"data": None, "total": 0, "limit": 0, "offset": 0, "errors": [{"code": status, "msg": message}]}
    return JSONResponse(body, status_code=status)


def v3_error(status: int, message: str) -> JSONResponse:
    """Jaeger API v3's (grpc-gateway) error body with HTTP ``status``."""
    return JSONResponse({"error": {"httpCode": status, "message": message}}, status_code=status)


def _validation_message(exc: RequestValidationError) -> str:
    """``unable to parse param 'limit': ...`` for each failed parameter, as Jaeger words it."""
    parts = []
    for err in exc.errors():
        name = err.get("loc", ("", ""))[-1]
        parts.append(f"unable to parse param '{name}': {err.get('msg', 'invalid value')}")
    return "; ".join(parts)


def _with_headers(response: JSONResponse, headers: dict[str, str] | None) -> JSONResponse:
    response.headers.update(headers or {})
    return response


def _route_class(answer: Callable[[int, str], JSONResponse]) -> type[APIRoute]:
    """An APIRoute whose handler answers every failure with ``answer(status, message)``."""

    class JaegerRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def route(request: Request) -> Response:
                try:
                    return await handler(request)
                except JaegerError as exc:
                    return answer(exc.status, exc.message)
                except ApiError as exc:
                    return _with_headers(answer(exc.status, exc.message), exc.headers)
                except ReadLimitError as exc:
                    refused = limit_error(exc)
                    return _with_headers(answer(refused.status, refused.message), refused.headers)
                except RequestValidationError as exc:
                    return answer(400, _validation_message(exc))
                except Exception:
                    log.exception("Jaeger API request %s failed", request.url.path)
                    return answer(500, "internal error while reading traces")

            return route

    return JaegerRoute


JaegerV1Route = _route_class(v1_error)
"""Route class of the ``/api`` (v1) router."""

JaegerV3Route = _route_class(v3_error)
"""Route class of the ``/api/v3`` router."""
