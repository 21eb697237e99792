"""JSON error envelope ``{"error": {"code", "message"}}`` for every REST failure, a read over a budget of the store
(``storage.clickhouse.ReadLimitError``: 400, 413 or 503, :func:`limit_error`) among them."""

from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from query.store import ReadLimitError


class ApiError(Exception):
    """An error with its HTTP status, machine-readable code and any headers of its answer (``Retry-After``)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


_LIMITS: dict[str, tuple[int, str, str]] = {
    "rows": (
        413,
        "read_too_large",
        "the traces found hold more spans than one search may return (HOTSPAN_MAX_SEARCH_SPANS); narrow the window, "
        "add filters or lower the limit",
    ),
    "memory": (
        413,
        "read_too_large",
        "the read needs more memory than one read may use (HOTSPAN_READ_MAX_MEMORY_BYTES); narrow the window or add "
        "filters",
    ),
    "time": (
        503,
        "read_timeout",
        "the read took longer than one read may (HOTSPAN_READ_TIMEOUT_S); narrow the window, or retry later",
    ),
    "size": (400, "query_too_large", "the query is larger than the store accepts; use fewer filters"),
}


def limit_error(exc: ReadLimitError, retry_after_s: float = 1.0) -> ApiError:
    """The answer to a read that ``exc`` stopped at a budget: 413, 503 (with ``Retry-After``, seconds) or 400."""
    status, code, message = _LIMITS[exc.limit]
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))} if status == 503 else None
    return ApiError(status, code, message, headers)


def install_error_handlers(app: FastAPI) -> None:
    """Answer API errors, validation failures and unknown routes in the JSON envelope."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(ReadLimitError)
    async def _read_limit(_: Request, exc: ReadLimitError) -> JSONResponse:
        answer = limit_error(exc)
        return error_response(answer.status, answer.code, answer.message, answer.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = "; ".join(
            f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', '')}" for err in exc.errors()
        )
        return error_response(400, "invalid_parameter", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, "http_error", str(exc.detail))
