"""Errors of the Tempo routes: a plain-text body with the HTTP status, as Tempo answers (``http.Error``), which
Grafana's Tempo data source shows as is.

Bad input (an unparsable parameter, TraceQL outside the subset) is a 400; a read over a budget a 400, 413 or 503
(:mod:`api.read_pool`, with ``Retry-After`` on a 503); another failure a 500 whose text names no SQL (the cause goes
to the log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from fastapi.routing import APIRoute

from api.errors import ApiError, limit_error
from query.store import ReadLimitError

log = logging.getLogger(__name__)


class TempoError(Exception):
    """A request the Tempo API refuses: HTTP ``status`` and the text answered."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def tempo_error(status: int, message: str, headers: dict[str, str] | None = None) -> PlainTextResponse:
    """Tempo's error answer: ``message`` as ``text/plain`` with HTTP ``status``."""
    return PlainTextResponse(message + "\n", status_code=status, headers=headers)


class TempoRoute(APIRoute):
    """An APIRoute whose handler answers every failure with :func:`tempo_error`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except TempoError as exc:
                return tempo_error(exc.status, exc.message)
            except ApiError as exc:
                return tempo_error(exc.status, exc.message, exc.headers)
            except ReadLimitError as exc:
                refused = limit_error(exc)
                return tempo_error(refused.status, refused.message, refused.headers)
            except RequestValidationError as exc:
                names = ", ".join(str(err.get("loc", ("",))[-1]) for err in exc.errors())
                return tempo_error(400, f"invalid parameter: {names}")
            except Exception:
                log.exception("Tempo API request %s failed", request.url.path)
                return tempo_error(500, "internal error while reading traces")

        return route
