"""Hotspan's own ingest metrics on /metrics (Prometheus text format)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from hotspan.server import RunningServer


def test_ingest_metrics_are_exposed_with_reasons_queue_spool_and_latency(hotspan_server: RunningServer) -> None:
    spans = [
        {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": span_id,
            "name": "op",
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": end,
        }
        for span_id, end in (("1111111111111111", "1700000000000001000"), ("2222222222222222", "1"))
    ]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    assert httpx.post(f"{hotspan_server.base_url}/v1/traces", json=body).status_code == 200

    answer = httpx.get(f"{hotspan_server.base_url}/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }
    assert samples[("hotspan_ingest_spans_accepted_total", (("protocol", "http/json"),))] == 1
    rejected = (("protocol", "http/json"), ("reason", "end_before_start"))
    assert samples[("hotspan_ingest_spans_rejected_total", rejected)] == 1
    assert samples[("hotspan_ingest_requests_total", (("outcome", "partial"), ("protocol", "http/json")))] == 1
    for gauge in (
        "hotspan_ingest_queue_spans",
        "hotspan_ingest_queue_bytes",
        "hotspan_spool_bytes",
        "hotspan_spool_segments",
        "hotspan_spool_spans",
        "hotspan_spool_oldest_age_seconds",
        "hotspan_spool_full",
    ):
        assert samples[(gauge, ())] == 0, gauge
    assert samples[("hotspan_storage_available", ())] == 1
    assert samples[("hotspan_storage_insert_seconds_count", ())] == 1
    assert samples[("hotspan_storage_inserted_spans_total", ())] == 1
    assert samples[("hotspan_storage_insert_retries_total", ())] == 0
