"""Tenants: who owns a stored row, and which tenant a request acts for, as every layer sees it.

A tenant is a name from the auth file (``hotspan.auth``); it comes from the caller's bearer token, never
from span content or query parameters. It is stored with every span in ``otel_traces.Tenant`` (migration
0030) and in every derived table; every read filters by it.

- **Rows without a tenant** (``Tenant = ''``: written before migration 0030, or by an OpenTelemetry Collector
  writing into the same tables) belong to :data:`DEFAULT_TENANT`. Readers fold ``''`` to it
  (:data:`storage.trace_sql.TENANT`); derived tables store the folded name, never ``''``.
- **Reads** take ``tenant: str | None``: a name reads that tenant's rows only; ``None`` (:data:`ALL_TENANTS`)
  reads every tenant and is only ever passed for an admin token. SQL binds it as two parameters
  (:func:`tenant_parameters`), so the query text is the same for every tenant.
- **Requests** carry their :class:`Tenancy` in the ASGI scope under :data:`SCOPE_KEY` (set by the auth
  middleware; Dash callbacks see the same scope as ``environ["asgi.scope"]``); gRPC calls carry the
  tenant to write in :data:`INGEST_TENANT` (set by the auth interceptor around the call).

This module sits in the lowest layer so that collector, api and dashboards can read the tenant without
importing ``hotspan.auth``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_TENANT: Final = "default"
"""Tenant of rows stored without one, and of every request to a server running without an auth file."""

ALL_TENANTS: Final = None
"""The ``tenant`` argument of a read across every tenant (admin tokens only)."""

TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A valid tenant name: 1-64 characters, letters, digits, ``.``, ``_``, ``-``, not starting with a symbol.
Tenant names end up in Prometheus labels and log lines; this keeps them plain."""

SCOPE_KEY: Final = "hotspan.tenancy"
"""ASGI scope key holding the request's :class:`Tenancy`."""

INGEST_TENANT: ContextVar[str] = ContextVar("hotspan_ingest_tenant", default=DEFAULT_TENANT)
"""Tenant an OTLP/gRPC export is stored under; set by the gRPC auth interceptor for the duration of a call."""


@dataclass(frozen=True)
class Tenancy:
    """The tenant a request acts for.

    Attributes:
        tenant: the tenant its spans are stored under, and the one it reads.
        all_tenants: ``True`` for an admin token: reads cover every tenant.
    """

    tenant: str
    all_tenants: bool = False

    @property
    def read_tenant(self) -> str | None:
        """The ``tenant`` argument of the storage reads this request makes (``None``: every tenant)."""
        return ALL_TENANTS if self.all_tenants else self.tenant


UNAUTHENTICATED = Tenancy(DEFAULT_TENANT)
"""The tenancy of a request whose scope holds none: a component served without the auth middleware
(a test mounting one router) acts for the default tenant only, never for all of them."""


def tenancy_of(scope: Mapping[str, Any]) -> Tenancy:
    """The :class:`Tenancy` of an ASGI scope (or the scope a WSGI ``environ["asgi.scope"]`` holds);
    :data:`UNAUTHENTICATED` when the auth middleware did not run."""
    found = scope.get(SCOPE_KEY)
    return found if isinstance(found, Tenancy) else UNAUTHENTICATED


def check_tenant_name(name: str) -> str:
    """Return ``name`` if it matches :data:`TENANT_NAME`.

    Raises:
        ValueError: naming the value and the rule.
    """
    if not TENANT_NAME.match(name):
        raise ValueError(
            f"tenant {name!r} is not 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit"
        )
    return name


def tenant_condition(column: str = "Tenant") -> str:
    """The one tenant condition of every read: ``column`` (an SQL expression holding a row's tenant) is the
    caller's tenant, or every tenant passes for an admin. Bound by :func:`tenant_parameters`.

    The result holds bound-parameter braces: insert it into ``str.format`` templates as a field value, never as
    template text.
    """
    return f"({{all_tenants:Bool}} OR {column} = {{tenant:String}})"


def tenant_parameters(tenant: str | None) -> dict[str, object]:
    """The bound parameters of :func:`tenant_condition`: ``{"tenant": name, "all_tenants": False}``, or
    ``{"tenant": "", "all_tenants": True}`` for ``None``.

    Raises:
        ValueError: ``tenant`` is not a valid name (a bug upstream: names come from the auth file).
    """
    if tenant is ALL_TENANTS:
        return {"tenant": "", "all_tenants": True}
    return {"tenant": check_tenant_name(tenant), "all_tenants": False}
