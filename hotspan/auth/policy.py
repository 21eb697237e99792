"""Which role each HTTP path needs: one table, checked before any route runs.

A path not listed needs ``admin``: a route someone adds later is closed until it is listed here, never
open by accident. Prefixes match whole segments (``/api`` matches ``/api`` and ``/api/...``, not ``/apix``).
"""

from __future__ import annotations

from hotspan.auth.config import Role

PUBLIC_PATHS = frozenset({"/", "/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Paths anyone may call: liveness (probes carry no token), the API description, and the root redirect."""
PUBLIC_PREFIXES = ("/docs/assets",)
"""Prefixes anyone may read: the docs pages' own JavaScript and CSS (:data:`hotspan.docs.DOCS_ASSETS`)."""

LOGIN_PATH = "/auth/login"
LOGOUT_PATH = "/auth/logout"

UI_PREFIX = "/ui"

RULES: tuple[tuple[str, Role], ...] = (
    ("/v1/traces", Role.INGEST),
    # Deleting what users said (api.payloads) changes the store: more than reading it.
    ("/api/v1/payloads", Role.ADMIN),
    ("/api", Role.QUERY),
    ("/tempo", Role.QUERY),
    ("/mcp", Role.QUERY),
    (UI_PREFIX, Role.QUERY),
    # Admin until /metrics renders only the caller's tenant's series (see hotspan.auth's module docstring).
    ("/metrics", Role.ADMIN),
)
"""``(path prefix, role)``, first match wins."""


def required_role(path: str) -> Role | None:
    """The role ``path`` needs; ``None`` for a public path."""
    if path in PUBLIC_PATHS or path in (LOGIN_PATH, LOGOUT_PATH):
        return None
    if any(under(path, prefix) for prefix in PUBLIC_PREFIXES):
        return None
    for prefix, role in RULES:
        if under(path, prefix):
            return role
    return Role.ADMIN


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or below it, segment-wise."""
    return path == prefix or path.startswith(prefix + "/")
