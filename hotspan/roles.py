"""Which parts of Hotspan one process runs (setting ``HOTSPAN_ROLE``, ``hotspan serve --role``), so the parts
scale out apart on a ClickHouse cluster (``deploy/README.md``):

==============  ======  =====  ========  ===========================================================
role            ingest  query  pipeline  scale-out
==============  ======  =====  ========  ===========================================================
``all``         yes     yes    yes       one process does everything (the default)
``collector``   yes     no     no        N-wide behind a load balancer; state: its spool only
``query``       no      yes    no        N-wide; reads only
``pipeline``    no      no     yes       N workers, worker i of N given ``HOTSPAN_PIPELINE_SHARD=i/N``
==============  ======  =====  ========  ===========================================================

- ingest: OTLP/HTTP ``/v1/traces``, OTLP/gRPC, the spool and the writer (``collector``);
- query: the REST and Jaeger APIs, the UI, the SLO evaluator and the anomaly loop (``query``, ``api``, ``dashboards``,
  ``alerts``); several query nodes each judge the same minutes into the same incidents (their IDs are derived from
  the window), and Alertmanager merges their identical alerts;
- pipeline: the quiet-trace analysis and its processors (``processors.pipeline``), on the worker's share of traces.

Every role serves ``/healthz`` and ``/metrics``, both naming the role.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotspan.settings import Role


@dataclass(frozen=True)
class RoleParts:
    """The parts a role runs (module docstring)."""

    ingest: bool
    query: bool
    pipeline: bool


PARTS: dict[Role, RoleParts] = {
    "all": RoleParts(ingest=True, query=True, pipeline=True),
    "collector": RoleParts(ingest=True, query=False, pipeline=False),
    "query": RoleParts(ingest=False, query=True, pipeline=False),
    "pipeline": RoleParts(ingest=False, query=False, pipeline=True),
}
"""The parts of each role of ``hotspan.settings.ROLES``."""
