"""Which parts of Hotspan one process runs (setting ``HOTSPAN_ROLE``, ``hotspan serve --role``), so the parts
scale out apart on a ClickHouse cluster (``deploy/README.md``):

==============  ======  =====  ========  =========  ===========================================================
role            ingest  query  pipeline  incidents  scale-out
==============  ======  =====  ========  =========  ===========================================================
``all``         yes     yes    yes       yes        one process does everything (the default)
``collector``   yes     no     no        no         N-wide behind a load balancer; state: its spool only
``query``       no      yes    no        no         N-wide; reads only
``pipeline``    no      no     yes       worker 0   N workers, worker i of N given ``HOTSPAN_PIPELINE_SHARD=i/N``
==============  ======  =====  ========  =========  ===========================================================

- ingest: OTLP/HTTP ``/v1/traces``, OTLP/gRPC, the spool and the writer (``collector``);
- query: the REST and Jaeger APIs, the UI and the SLO evaluator (``query``, ``api``, ``dashboards``, ``alerts``);
- pipeline: the quiet-trace analysis and its processors (``processors.pipeline``), on the worker's share of traces;
- incidents: the anomaly loop (``incidents``: the lifecycle fed by the query room's anomaly scores, and its
  notifications), run by one process only: ``all``, or pipeline worker 0 of N (a background job over stored data,
  like the analysis, and one such worker exists in every split).

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
    incidents: bool
    """Whether the role may own the incident lifecycle; :func:`runs_incidents` says whether this process does."""


PARTS: dict[Role, RoleParts] = {
    "all": RoleParts(ingest=True, query=True, pipeline=True, incidents=True),
    "collector": RoleParts(ingest=True, query=False, pipeline=False, incidents=False),
    "query": RoleParts(ingest=False, query=True, pipeline=False, incidents=False),
    "pipeline": RoleParts(ingest=False, query=False, pipeline=True, incidents=True),
}
"""The parts of each role of ``hotspan.settings.ROLES``."""


def runs_incidents(settings: Settings) -> bool:
    """Whether this process runs the anomaly loop (module docstring): ``HOTSPAN_ANOMALY`` is on and its role owns
    the incident lifecycle as worker 0 of its ``HOTSPAN_PIPELINE_SHARD`` (``all`` is 0/1 unless split too), so a
    split deployment judges each minute once."""
    return settings.anomaly and PARTS[settings.role].incidents and settings.pipeline_split[0] == 0
