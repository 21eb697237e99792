"""Keeping tokens out of log lines that carry request URLs.

Hotspan never logs a token itself. What could is a URL a client sent with a token in its query string
(``/ui/?token=...``, or a client mistakenly sending ``?access_token=`` to the API, RFC 6750 §2.3), written by
uvicorn's access log; and a stray ``Bearer ...`` in a message. :class:`RedactTokens` rewrites both before any
handler sees the record.
"""

from __future__ import annotations

import logging
import re

_QUERY_TOKEN = re.compile(r"(?i)((?:^|[?&\s])(?:access_)?token=)[^&\s\"']*")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9\-._~+/]+=*")
REDACTED = "[redacted]"

LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn")
"""Loggers :func:`install` filters: those that print request lines."""


def redact(text: str) -> str:
    """``text`` with ``token=`` / ``access_token=`` query values and ``Bearer`` credentials replaced."""
    return _BEARER.sub(rf"\g<1>{REDACTED}", _QUERY_TOKEN.sub(rf"\g<1>{REDACTED}", text))


class RedactTokens(logging.Filter):
    """A filter that redacts the message and string arguments of every record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install() -> None:
    """Add one :class:`RedactTokens` to each of :data:`LOGGERS` (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())
