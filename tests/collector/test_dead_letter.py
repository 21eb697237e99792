"""The isolation of spans the store refuses (:func:`collector.dead_letter.isolate`), on real OTLP requests: every
span is stored once or set aside once, what is set aside is exactly what the store refuses, and a store that
refuses everything is not mistaken for poisoned data. The served path is in
``tests/reliability/test_reliability_no_loss.py``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_random import request, span

from collector.dead_letter import FAILURES_BEFORE_PROOF, Request, UnprovenRefusal, isolate, split_request


def names(body: bytes) -> list[str]:
    parsed = ExportTraceServiceRequest.FromString(body)
    return [s.name for r in parsed.resource_spans for sc in r.scope_spans for s in sc.spans]


class Store:
    """Stores parts; refuses every part holding a span named in ``refused`` (or every part at all)."""

    def __init__(self, refused: set[str], everything: bool = False) -> None:
        self.refused, self.everything = refused, everything
        self.stored: list[str] = []
        self.attempts = 0

    def __call__(self, part: Sequence[Request]) -> None:
        self.attempts += 1
        held = [name for body, _ in part for name in names(body)]
        if self.everything or self.refused & set(held):
            raise DatabaseError("Code: 1001. DB::Exception: refused")
        self.stored.extend(held)


def requests(count: int, spans: int) -> list[Request]:
    return [
        (request(*(span(r * spans + i + 1, name=f"s{r * spans + i}") for i in range(spans))).SerializeToString(), "t")
        for r in range(count)
    ]


@pytest.mark.parametrize("poison", [{"s0"}, {"s17"}, {"s5", "s33"}, {"s39"}])
def test_only_the_refused_spans_are_set_aside_and_every_other_is_stored_once(poison: set[str]) -> None:
    store = Store(poison)
    parts = requests(4, 10)
    try:
        poisoned = isolate(parts, store, proven=False, reason="refused whole")
    except UnprovenRefusal:
        # Both halves refused (a poison span in each): taken for a failing store until another insert succeeds,
        # after which the pipeline isolates with proof.
        assert len(poison) > 1 and store.stored == []
        poisoned = isolate(parts, store, proven=True, reason="refused whole")
    assert sorted(n for p in poisoned for n in names(p.body)) == sorted(poison)
    assert all(p.tenant == "t" and "refused" in p.reason for p in poisoned)
    assert sorted(store.stored) == sorted(f"s{i}" for i in range(40) if f"s{i}" not in poison)


def test_a_store_refusing_everything_is_not_taken_for_poisoned_data() -> None:
    store = Store(set(), everything=True)
    with pytest.raises(UnprovenRefusal):
        isolate(requests(4, 10), store, proven=False, reason="down")
    assert store.attempts == FAILURES_BEFORE_PROOF and store.stored == []


def test_a_single_span_refused_after_proof_is_set_aside_with_the_stores_reason() -> None:
    lone = requests(1, 1)
    with pytest.raises(UnprovenRefusal):
        isolate(lone, Store({"s0"}), proven=False, reason="refused whole")
    (poisoned,) = isolate(lone, Store({"s0"}), proven=True, reason="refused whole")
    assert (names(poisoned.body), poisoned.reason) == (["s0"], "refused whole")


def test_a_split_keeps_every_span_with_its_resource_once() -> None:
    ((body, _),) = requests(1, 5)
    halves = split_request(body)
    assert halves is not None
    assert names(halves[0]) + names(halves[1]) == names(body)
    for half in halves:
        assert ExportTraceServiceRequest.FromString(half).resource_spans[0].resource == (
            ExportTraceServiceRequest.FromString(body).resource_spans[0].resource
        )
    assert split_request(requests(1, 1)[0][0]) is None
    assert split_request(b"\xff\xff") is None
