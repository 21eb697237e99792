"""Shared by the security tests: an auth file with tokens of three tenants and an admin, and a store seeded so
that every cross-tenant leak shows up as a marker string in an answer.

Tenants and their data (all spans start about an hour ago, inside every API's default window):

- ``acme``: trace :data:`ACME_TRACE` (``acme-gateway`` → ``acme-llm``) and its half of :data:`SHARED_TRACE`;
- ``beta``: trace :data:`BETA_TRACE` (``beta-gateway`` → ``beta-db``), whose spans *claim* to be acme's
  (a ``tenant``/``hotspan.tenant`` attribute saying ``acme``: span content never decides the tenant), and
  its half of :data:`SHARED_TRACE`: a ``beta-intruder`` span whose parent is acme's root span, so a query that
  joins spans across tenants would report a call ``acme-gateway → beta-intruder``;
- ``default``: trace :data:`DEFAULT_TRACE`, stored without a tenant (as an OTel Collector writes rows).

Every string in :data:`MARKERS` belongs to one tenant; an answer to one tenant holding another's is a leak.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.batch import to_batch
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from hotspan.auth.hashing import SCRYPT, hash_token
from storage.writer import TraceWriter

SHARED_TRACE = "5ec00000000000000000000000c0ffee"
ACME_TRACE = "acac0000000000000000000000000001"
BETA_TRACE = "bebe0000000000000000000000000002"
DEFAULT_TRACE = "dddd0000000000000000000000000003"
START_NS = (time.time_ns() // 1_000_000_000 - 3600) * 1_000_000_000


@dataclass(frozen=True)
class Token:
    """A token of the test auth file."""

    name: str
    secret: str
    tenant: str
    roles: tuple[str, ...]
    scheme: str = "sha256"

    @property
    def header(self) -> dict[str, str]:
        """``Authorization: Bearer ...`` for this token."""
        return {"authorization": f"Bearer {self.secret}"}


ACME_INGEST = Token("acme-collector", "hsp_acme-ingest-0123456789abcdefghijklmnopqrstuv", "acme", ("ingest",))
ACME_QUERY = Token("acme-grafana", "hsp_acme-query-0123456789abcdefghijklmnopqrstuvw", "acme", ("query",), SCRYPT)
BETA_INGEST = Token("beta-collector", "hsp_beta-ingest-0123456789abcdefghijklmnopqrstuv", "beta", ("ingest",))
BETA_QUERY = Token("beta-grafana", "hsp_beta-query-0123456789abcdefghijklmnopqrstuvw", "beta", ("query",))
DEFAULT_QUERY = Token("default-viewer", "hsp_default-query-0123456789abcdefghijklmnopqrst", "default", ("query",))
ADMIN = Token("ops-admin", "hsp_ops-admin-0123456789abcdefghijklmnopqrstuvwxy", "ops", ("admin",))
EVERYTHING = Token("ops-all", "hsp_ops-all-0123456789abcdefghijklmnopqrstuvwxyz0", "ops", ("admin", "ingest", "query"))
TOKENS = (ACME_INGEST, ACME_QUERY, BETA_INGEST, BETA_QUERY, DEFAULT_QUERY, ADMIN, EVERYTHING)

MARKERS = {
    "acme": ("acme-gateway", "acme-llm", "acme-secret-prompt", ACME_TRACE, "aaaa000000000001"),
    "beta": ("beta-gateway", "beta-db", "beta-intruder", "beta-secret-prompt", BETA_TRACE, "bbbb000000000001"),
    "default": ("default-svc", "default-secret-prompt", DEFAULT_TRACE),
}
"""Strings that appear only in one tenant's data (services, attribute values, trace and span IDs)."""


def foreign_markers(tenant: str) -> tuple[str, ...]:
    """Every marker of the tenants other than ``tenant``."""
    return tuple(m for owner, markers in MARKERS.items() if owner != tenant for m in markers)


def write_auth_file(directory: Path) -> Path:
    """The auth file of :data:`TOKENS` (JSON, which the YAML loader reads too)."""
    entries = [
        {"name": t.name, "hash": hash_token(t.secret, t.scheme), "tenant": t.tenant, "roles": list(t.roles)}
        for t in TOKENS
    ]
    path = directory / "auth.json"
    path.write_text(json.dumps({"tokens": entries}), encoding="utf-8")
    return path


def span(trace_id: str, span_id: str, parent: str, name: str, offset_ms: int, **attributes: str) -> dict[str, Any]:
    """An OTLP/JSON span starting ``offset_ms`` after :data:`START_NS`, lasting 10 ms."""
    start = START_NS + offset_ms * 1_000_000
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 2,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 10_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def export_body(service: str, *spans: dict[str, Any], **resource: str) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` of one resource."""
    attributes = [{"key": "service.name", "value": {"stringValue": service}}]
    attributes += [{"key": k, "value": {"stringValue": v}} for k, v in resource.items()]
    return {"resourceSpans": [{"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}]}


def seed(writer: TraceWriter) -> None:
    """Store the three tenants' data described in the module docstring."""
    ingestor = Ingestor(writer)

    def store(tenant: str, body: dict[str, Any]) -> None:
        request, rejections = request_from_json(body)
        assert rejections == []
        assert ingestor.export(request, [], tenant=tenant).rejected == 0

    store(
        "acme",
        export_body(
            "acme-gateway",
            span(ACME_TRACE, "aaaa000000000001", "", "POST /chat", 0, prompt="acme-secret-prompt"),
            span(SHARED_TRACE, "aaaa0000000000ff", "", "POST /shared", 5),
        ),
    )
    store("acme", export_body("acme-llm", span(ACME_TRACE, "aaaa000000000002", "aaaa000000000001", "generate", 1)))
    claims = {"tenant": "acme", "hotspan.tenant": "acme"}
    store(
        "beta",
        export_body(
            "beta-gateway",
            span(BETA_TRACE, "bbbb000000000001", "", "POST /chat", 2, prompt="beta-secret-prompt", **claims),
            **claims,
        ),
    )
    store("beta", export_body("beta-db", span(BETA_TRACE, "bbbb000000000002", "bbbb000000000001", "SELECT", 3)))
    store("beta", export_body("beta-intruder", span(SHARED_TRACE, "bbbb0000000000ff", "aaaa0000000000ff", "poke", 6)))
    default_span = span(DEFAULT_TRACE, "dddd000000000001", "", "GET /", 4, prompt="default-secret-prompt")
    request, _ = request_from_json(export_body("default-svc", default_span))
    writer.write(to_batch(request).table)
