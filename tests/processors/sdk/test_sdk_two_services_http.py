"""Two services over real HTTP on loopback: identical sampling decisions, no partial traces.

Gateway -> agent, each with its own TracerProvider, BaggageSampler (same table, separate instances)
and InMemorySpanExporter; context crosses the wire as traceparent, tracestate and baggage headers.
"""

import math
import random
from collections.abc import Iterator

import pytest
from sdk_http_services import SET_BAGGAGE_HEADER, Client, Service

POLICIES = {
    "default_ratio": 0.0,
    "policies": [
        {"name": "debug", "match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"name": "off", "match": {"sample_policy": "off"}, "sample": "never"},
        {"name": "staging", "match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"},
    ],
}
HALF = 1 << 55


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Service, Service, Client]]:
    agent = Service("agent", POLICIES)
    gateway = Service("gateway", POLICIES, downstream=agent)
    client = Client(gateway)
    yield gateway, agent, client
    client.close()
    gateway.close()
    agent.close()


@pytest.fixture
def services(stack: tuple[Service, Service, Client]) -> tuple[Service, Service, Client]:
    for service in stack[:2]:
        service.exporter.clear()
    return stack


def trace_ids(service: Service) -> set[str]:
    return {f"{span.context.trace_id:032x}" for span in service.spans()}


def assert_no_partial_traces(gateway: Service, agent: Service) -> None:
    assert trace_ids(gateway) == trace_ids(agent)
    gateway_span_ids = {span.context.span_id for span in gateway.spans()}
    for span in agent.spans():
        assert span.parent is not None and span.parent.span_id in gateway_span_ids


def test_half_ratio_tenant_keeps_half_with_identical_decisions(services: tuple[Service, Service, Client]) -> None:
    gateway, agent, client = services
    requests = 2000
    random.seed(2000)  # the SDK draws trace IDs from the global generator: a fixed seed, a fixed outcome
    sent = [client.get({"baggage": "tenant_id=staging-eu"}) for _ in range(requests)]
    kept = trace_ids(gateway)
    assert_no_partial_traces(gateway, agent)
    assert kept == {trace_id for trace_id in sent if int(trace_id[-14:], 16) >= HALF}
    fraction = len(kept) / requests
    assert abs(fraction - 0.5) <= 3 * math.sqrt(0.25 / requests), fraction
    for span in gateway.spans() + agent.spans():
        assert span.attributes["hotspan.sampling.channel"] == "gray"
        assert span.attributes["tenant_id"] == "staging-eu"
        assert span.context.trace_state.get("ot") == "th:8"


def test_explicit_randomness_decides_in_every_service(services: tuple[Service, Service, Client]) -> None:
    """An unsampled upstream with ``rv``: each service decides itself, from the same rv, alike."""
    gateway, agent, client = services
    rng = random.Random(17)
    expected: set[str] = set()
    for _ in range(500):
        trace_id, rv = f"{rng.getrandbits(128):032x}", rng.getrandbits(56)
        client.get(
            {
                "traceparent": f"00-{trace_id}-00f067aa0ba902b7-00",
                "tracestate": f"ot=rv:{rv:014x}",
                "baggage": "tenant_id=staging-us",
            }
        )
        if rv >= HALF:
            expected.add(trace_id)
    assert trace_ids(gateway) == expected
    assert_no_partial_traces(gateway, agent)
    assert 0.4 <= len(expected) / 500 <= 0.6


def test_debug_high_arrives_complete_at_default_ratio_zero(services: tuple[Service, Service, Client]) -> None:
    gateway, agent, client = services
    sent = {client.get({"baggage": "sample_policy=debug-high"}) for _ in range(50)}
    assert trace_ids(gateway) == sent
    assert_no_partial_traces(gateway, agent)
    assert all(span.context.trace_state.get("ot") == "th:0" for span in agent.spans())


def test_off_drops_everywhere(services: tuple[Service, Service, Client]) -> None:
    gateway, agent, client = services
    for _ in range(50):
        client.get({"baggage": "sample_policy=off,tenant_id=staging-eu"})
        client.get({"baggage": "tenant_id=prod-eu"})  # no policy: default ratio 0
    assert gateway.spans() == () and agent.spans() == ()


def test_sampled_parent_wins_over_off(services: tuple[Service, Service, Client]) -> None:
    gateway, agent, client = services
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    client.get({"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01", "baggage": "sample_policy=off"})
    assert trace_ids(gateway) == trace_ids(agent) == {trace_id}
    for span in gateway.spans() + agent.spans():
        assert span.attributes["hotspan.sampling.policy"] == "off"


def test_off_set_mid_trace_does_not_cut_the_trace(services: tuple[Service, Service, Client]) -> None:
    """The gateway records the request, then adds ``sample_policy=off`` before calling the agent."""
    gateway, agent, client = services
    sent = client.get({"baggage": "sample_policy=debug-high", SET_BAGGAGE_HEADER: "sample_policy=off"})
    assert trace_ids(gateway) == trace_ids(agent) == {sent}
    (agent_span,) = agent.spans()
    assert agent_span.attributes["hotspan.sampling.policy"] == "off"


def test_percent_encoded_baggage_with_properties(services: tuple[Service, Service, Client]) -> None:
    gateway, agent, client = services
    sent = [client.get({"baggage": "tenant_id=staging%2Deu%20west;ttl=60;p, other=1"}) for _ in range(200)]
    assert trace_ids(gateway) == {trace_id for trace_id in sent if int(trace_id[-14:], 16) >= HALF}
    assert_no_partial_traces(gateway, agent)
    for span in gateway.spans() + agent.spans():
        assert span.attributes["tenant_id"] == "staging-eu west"
        assert span.attributes["hotspan.sampling.policy"] == "staging"
