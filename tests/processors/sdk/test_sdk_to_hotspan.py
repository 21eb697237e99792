"""Two services exporting over OTLP to a served Hotspan: what arrives there is whole traces only.

The same gateway -> agent pair as ``test_sdk_two_services_http``, each service with its own
TracerProvider, BaggageSampler and an OTLP/HTTP exporter behind a BatchSpanProcessor to a real Hotspan on
loopback; the assertions read back through Hotspan's REST API once both have flushed.
"""

import math
import random
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from sdk_http_services import Client, Service

from hotspan.server import RunningServer
from hotspan_sdk import StaticRule

POLICIES = {
    "default_ratio": 0.0,
    "policies": [
        {"name": "debug", "match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"name": "off", "match": {"sample_policy": "off"}, "sample": "never"},
        {"name": "staging", "match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"},
    ],
}


class Stack:
    """The client, the served Hotspan, and the two services, whose spans :meth:`exported` sends now."""

    def __init__(self, client: Client, server: RunningServer, services: tuple[Service, ...]) -> None:
        self.client, self.server, self.services = client, server, services

    def exported(self) -> RunningServer:
        """The served Hotspan, once both services have exported every ended span to it and it has stored them (an
        answer may go out before the insert when another is running)."""
        for service in self.services:
            service.flush()
        assert self.server.pipeline is not None and self.server.pipeline.flush()
        return self.server


@pytest.fixture
def stack(hotspan_server: RunningServer) -> Iterator[Stack]:
    def exporter() -> OTLPSpanExporter:
        return OTLPSpanExporter(endpoint=f"{hotspan_server.base_url}/v1/traces")

    agent = Service("agent", POLICIES, also_export_to=exporter(), hotspot_rules=[StaticRule(0.001, name="agent*")])
    gateway = Service("gateway", POLICIES, downstream=agent, also_export_to=exporter())
    client = Client(gateway)
    yield Stack(client, hotspan_server, (gateway, agent))
    client.close()
    gateway.close()
    agent.close()


def _stored(server: RunningServer, trace_id: str) -> list[dict]:
    answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}", timeout=30)
    return answer.json()["spans"] if answer.status_code == 200 else []


def test_debug_high_arrives_complete_from_every_service_at_ratio_zero(stack: Stack) -> None:
    client = stack.client
    sent = [client.get({"baggage": "sample_policy=debug-high"}) for _ in range(20)]
    server = stack.exported()
    for trace_id in sent:
        spans = _stored(server, trace_id)
        assert sorted(s["service_name"] for s in spans) == ["agent", "gateway"]
        assert {s["attributes"]["hotspan.sampling.policy"] for s in spans} == {"debug"}


def test_half_ratio_tenant_keeps_half_and_never_splits_a_trace(stack: Stack) -> None:
    client = stack.client
    requests = 400
    random.seed(400)
    sent = [client.get({"baggage": "tenant_id=staging-eu"}) for _ in range(requests)]
    server = stack.exported()
    found = httpx.get(
        f"{server.base_url}/api/v1/traces", params={"attr": "tenant_id:staging-eu", "limit": 10_000}, timeout=30
    ).json()["traces"]
    assert {t["trace_id"] for t in found} <= set(sent)
    assert all(t["span_count"] == 2 and t["service_count"] == 2 for t in found)
    fraction = len(found) / requests
    assert abs(fraction - 0.5) <= 3 * math.sqrt(0.25 / requests), fraction


def test_off_drops_everywhere(stack: Stack) -> None:
    client = stack.client
    sent = [client.get({"baggage": "sample_policy=off"}) for _ in range(10)]
    server = stack.exported()
    assert all(_stored(server, trace_id) == [] for trace_id in sent)


def test_sdk_flagged_spans_are_searchable_as_hotspots(stack: Stack) -> None:
    client = stack.client
    sent = {client.get({"baggage": "sample_policy=debug-high"}) for _ in range(3)}
    server = stack.exported()
    found = httpx.get(f"{server.base_url}/api/v1/traces", params={"hotspot": "true", "limit": 100}, timeout=30).json()
    assert {t["trace_id"] for t in found["traces"]} == sent
    assert all(t["hotspot_count"] == 1 for t in found["traces"])
    agent_span = next(s for s in _stored(server, next(iter(sent))) if s["service_name"] == "agent")
    assert agent_span["attributes"]["hotspan.hotspot"] == "true"
    assert agent_span["attributes"]["hotspan.hotspot.reason"] == "static"
