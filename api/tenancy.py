"""The tenant a REST request reads, as a FastAPI dependency: a route takes ``tenant: Tenant``.

The auth middleware (``hotspan.auth``) puts the caller's :class:`storage.tenancy.Tenancy` into the request
scope after checking its bearer token; the tenant never comes from a query parameter. A router served
without that middleware reads the default tenant only (:data:`storage.tenancy.UNAUTHENTICATED`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from query.store import tenancy_of


def read_tenant(request: Request) -> str | None:
    """The ``tenant`` argument of this request's storage reads: its tenant, or ``None`` (every tenant) for
    an admin token."""
    return tenancy_of(request.scope).read_tenant


Tenant = Annotated[str | None, Depends(read_tenant)]
"""A route parameter holding the reading tenant of the request (``None``: every tenant, admin tokens only);
it adds nothing to the OpenAPI parameters."""
