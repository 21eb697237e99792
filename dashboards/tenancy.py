"""The tenant a UI callback reads: the one of the signed-in session (``hotspan.auth``), never a form value.

Dash runs callbacks inside a Flask request; mounted under FastAPI through a2wsgi, the WSGI environ holds the
ASGI scope (``environ["asgi.scope"]``) where the auth middleware put the caller's
:class:`storage.tenancy.Tenancy`. Served without the middleware, the UI shows the default tenant only.
"""

from __future__ import annotations

import flask

from query.store import tenancy_of


def read_tenant() -> str | None:
    """The ``tenant`` argument of the storage reads of the current callback: the session's tenant, or ``None``
    (every tenant) for an admin. Call it inside a callback (a Flask request context).

    Raises:
        RuntimeError: called outside a request.
    """
    return tenancy_of(flask.request.environ.get("asgi.scope", {})).read_tenant
