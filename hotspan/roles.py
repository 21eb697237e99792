"""Which parts of Hotspan one process runs (setting ``HOTSPAN_ROLE``, ``hotspan serve --role``), so the parts
scale out apart on a ClickHouse cluster (``deploy/README.md``):

==============  ======  =====  ========  ==========  ==========================================================
role            ingest  query  pipeline  background  scale-out
==============  ======  =====  ========  ==========  ==========================================================
``all``         yes     yes    yes       yes         one process does everything (the default)
``collector``   yes     no     no        no          N-wide behind a load balancer; state: its spool only
``query``       no      yes    no        no          N-wide; reads only
``pipeline``    no      no     yes       worker 0    N workers, worker i of N given ``HOTSPAN_PIPELINE_SHARD=i/N``
==============  ======  =====  ========  ==========  ==========================================================

- ingest: OTLP/HTTP ``/v1/traces``, OTLP/gRPC, the spool and the writer (``collector``);
- query: the REST, Jaeger and Tempo APIs, the MCP server and the UI (``query``, ``api``, ``dashboards``);
- pipeline: the quiet-trace analysis and its processors (``processors.pipeline``), on the worker's share of traces;
- background: the jobs that judge stored data on a clock and notify, run by one process only
  (:func:`owns_background`): ``all``, or pipeline worker 0 of N (a background job over stored data, like the
  analysis, and one such worker exists in every split), so each alert and each incident is raised once however
  many query nodes serve: the anomaly loop (``incidents``: the lifecycle fed by the query room's anomaly scores,
  and its notifications; :func:`runs_incidents`) and the SLO evaluator (``alerts``, with ``HOTSPAN_ALERTS``).

Every role serves ``/healthz`` and ``/metrics``, both naming the role.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotspan.settings import Role, Settings


@dataclass(frozen=True)
class RoleParts:
    """The parts a role runs (module docstring)."""

    ingest: bool
    query: bool
    pipeline: bool
    background: bool
    """Whether the role may own the background work; :func:`owns_background` says whether this process does."""


PARTS: dict[Role, RoleParts] = {
    "all": RoleParts(ingest=True, query=True, pipeline=True, background=True),
    "collector": RoleParts(ingest=True, query=False, pipeline=False, background=False),
    "query": RoleParts(ingest=False, query=True, pipeline=False, background=False),
    "pipeline": RoleParts(ingest=False, query=False, pipeline=True, background=True),
}
"""The parts of each role of ``hotspan.settings.ROLES``."""


def owns_background(settings: Settings) -> bool:
    """Whether this process runs the background work (module docstring): its role may, and it is worker 0 of its
    ``HOTSPAN_PIPELINE_SHARD`` (``all`` is 0/1 unless split too), so a split deployment runs it once."""
    return PARTS[settings.role].background and settings.pipeline_split[0] == 0


def runs_incidents(settings: Settings) -> bool:
    """Whether this process runs the anomaly loop: ``HOTSPAN_ANOMALY`` is on and it owns the background work
    (:func:`owns_background`), so a split deployment judges each minute once."""
    return settings.anomaly and owns_background(settings)


def runs_slo_evaluator(settings: Settings) -> bool:
    """Whether this process evaluates the SLOs: an SLO file is set (``HOTSPAN_ALERTS``) and it owns the background
    work (:func:`owns_background`), so each burning SLO is alerted once however many query nodes serve."""
    return settings.alerts_path is not None and owns_background(settings)
