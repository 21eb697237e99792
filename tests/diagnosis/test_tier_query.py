"""Per-tier latency and drops through the query room (``DiagnosisService.tiers``) and the Services page's table."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import otlp_request

from collector.ingest import Ingestor
from dashboards.services_figures import tier_table
from query.service import QueryService
from storage.reader import TraceQuery


def test_tiers_of_a_stored_window_and_their_table(ingestor: Ingestor, query: QueryService) -> None:
    # Eight P0 requests a half, the last two of the second half refused (429); two and four P2 requests.
    ingestor.export(otlp_request(cases.tier_window(2, 4, p0_queue_second_ms=1.0, p0_drops_second=2)))
    tiers = query.diagnosis.tiers(TraceQuery(limit=100), tenant=None)
    assert tiers.select("service_name", "tier", "request_count", "dropped_count").rows() == [
        ("gateway", "P0", 16, 2),
        ("gateway", "P2", 6, 0),
    ]
    assert (tiers["latency_ms_p95"] >= tiers["latency_ms_p50"]).all()
    assert query.diagnosis.tiers(TraceQuery(service="nothing-here"), tenant=None).height == 0
    rendered = str(tier_table(tiers))
    assert "P0" in rendered and "12.5%" in rendered
    assert "No request" in str(tier_table(tiers.clear()))
