"""Documenting bearer auth in the OpenAPI description: the scheme, which operations need it, and their
401/403 answers (which the auth middleware gives before a route runs, so FastAPI cannot see them)."""

from __future__ import annotations

from typing import Any

from hotspan.auth.policy import required_role

SCHEME = "bearerAuth"

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def document_security(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the bearer scheme (RFC 6750) to ``schema`` and, on every operation its path's policy protects, a
    ``security`` requirement and 401/403 responses naming the role. Modifies and returns ``schema``."""
    schema.setdefault("components", {}).setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from the auth file (HOTSPAN_AUTH_FILE); its tenant scopes every read and write.",
    }
    for path, operations in schema.get("paths", {}).items():
        role = required_role(path)
        if role is None:
            continue
        for method, operation in operations.items():
            if method not in _METHODS:
                continue
            operation["security"] = [{SCHEME: []}]
            responses = operation.setdefault("responses", {})
            responses.setdefault("401", {"description": "Missing or invalid bearer token (`WWW-Authenticate`)."})
            responses.setdefault("403", {"description": f"The token lacks the `{role}` role."})
    return schema
