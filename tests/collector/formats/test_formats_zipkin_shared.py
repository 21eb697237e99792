"""Shared client/server span IDs split as `collector/formats/zipkin_shared.py` documents: the server half gets a
derived ID under the client half, and the server side's children follow it."""

from __future__ import annotations

import hashlib
from typing import Any

from zipkin_kit import attributes, convert_records, only, server_half_id

TRACE = "00000000000000000000000000000abc"
ROOT, SHARED = "00000000000000a1", "00000000000000b1"
WEB = {"serviceName": "web", "ipv4": "10.0.0.1"}
API = {"serviceName": "api", "ipv4": "10.0.0.2", "port": 8080}


def record(span_id: str, parent: str | None, local: dict, **fields: Any) -> dict[str, Any]:
    """A timed Zipkin v2 record of trace `abc` on the `local` endpoint."""
    parent_field = {"parentId": parent} if parent else {}
    return {"traceId": "abc", "id": span_id, **parent_field, "timestamp": 1_000, "localEndpoint": local, **fields}


def rpc() -> list[dict[str, Any]]:
    """web calls api with a shared span ID; each side has a child under that ID."""
    return [
        record(ROOT, None, WEB, kind="SERVER", name="root"),
        record(SHARED, ROOT, WEB, kind="CLIENT", name="call api"),
        record(SHARED, ROOT, API, kind="SERVER", name="serve", shared=True),
        record("00000000000000c1", SHARED, API, name="api work"),
        record("00000000000000c2", SHARED, {"serviceName": "web"}, name="web after send"),
    ]


def parents(spans: list[dict[str, Any]]) -> dict[str, str | None]:
    return {span["spanId"]: span.get("parentSpanId") for span in spans}


def test_server_half_gets_a_derived_id_under_the_client_and_takes_its_children() -> None:
    spans, rejected = convert_records(rpc())

    new_id = server_half_id(TRACE, SHARED, API)
    assert rejected == []
    assert parents(spans) == {
        ROOT: None,
        SHARED: ROOT,
        new_id: SHARED,
        "00000000000000c1": new_id,  # api's own child
        "00000000000000c2": SHARED,  # web's: it stays with the client half
    }
    server = only(spans, spanId=new_id)
    assert (server["name"], server["kind"], server["service"]) == ("serve", 2, "api")
    assert attributes(server)["zipkin.shared"] == {"boolValue": True}
    assert attributes(server)["zipkin.original_span_id"] == {"stringValue": SHARED}
    assert "zipkin.original_span_id" not in attributes(only(spans, spanId=SHARED))


def test_ids_do_not_change_between_imports_or_with_record_order() -> None:
    first, _ = convert_records(rpc())
    again, _ = convert_records(rpc())
    reversed_file, _ = convert_records(rpc()[::-1])

    assert parents(first) == parents(again) == parents(reversed_file)


def test_shared_span_without_its_client_half_keeps_its_id() -> None:
    spans, _ = convert_records([r for r in rpc() if r.get("kind") != "CLIENT"])

    server = only(spans, spanId=SHARED)
    assert server["parentSpanId"] == ROOT
    assert attributes(server)["zipkin.shared"] == {"boolValue": True}
    assert "zipkin.original_span_id" not in attributes(server)
    assert only(spans, spanId="00000000000000c1")["parentSpanId"] == SHARED


def test_client_half_without_a_server_half_is_left_alone() -> None:
    spans, _ = convert_records([r for r in rpc() if not r.get("shared")])

    assert parents(spans) == {ROOT: None, SHARED: ROOT, "00000000000000c1": SHARED, "00000000000000c2": SHARED}
    assert not any(key.startswith("zipkin.") for span in spans for key in attributes(span))


def test_client_half_without_timestamp_is_no_parent_to_split_under() -> None:
    # The client half will be rejected, so nothing shares the ID in storage: the server half keeps it and,
    # lacking a parentId, takes the client's (Zipkin's rule for shared spans).
    records = rpc()
    del records[1]["timestamp"]
    del records[2]["parentId"]

    spans, rejected = convert_records(records)

    assert [item.source for item in rejected] == ["t.json#/1"]
    assert only(spans, spanId=SHARED)["parentSpanId"] == ROOT
    assert only(spans, spanId="00000000000000c1")["parentSpanId"] == SHARED


def test_each_consumer_of_one_message_gets_its_own_id() -> None:
    # One producer span ID, consumed by two hosts of one service, as Kafka consumers are in the smartthings
    # traces (span cbab506b53f336fc there): each host's children follow its own server half; a child whose
    # endpoint fits both hosts stays with the client half.
    host1 = {"serviceName": "pusher", "ipv4": "10.6.83.20", "port": 8197}
    host2 = {"serviceName": "pusher", "ipv4": "10.6.88.250", "port": 8197}
    records = [
        record(SHARED, ROOT, {"serviceName": "bouncer"}, kind="CLIENT", name="send"),
        record(SHARED, ROOT, host1, kind="SERVER", name="receive", shared=True),
        record(SHARED, ROOT, host2, kind="SERVER", name="receive", shared=True),
        record("00000000000000c1", SHARED, host1, name="process.archiver"),
        record("00000000000000c2", SHARED, host2, name="process.oreck"),
        record("00000000000000c3", SHARED, {"serviceName": "pusher"}, name="process.unknown-host"),
    ]

    spans, _ = convert_records(records)

    half1, half2 = server_half_id(TRACE, SHARED, host1), server_half_id(TRACE, SHARED, host2)
    assert half1 != half2
    assert parents(spans) == {
        SHARED: ROOT,
        half1: SHARED,
        half2: SHARED,
        "00000000000000c1": half1,
        "00000000000000c2": half2,
        "00000000000000c3": SHARED,
    }


def test_a_derived_id_already_used_in_the_trace_is_hashed_again() -> None:
    taken = server_half_id(TRACE, SHARED, API)
    records = [*rpc(), record(taken, ROOT, WEB, name="holds the derived id")]

    spans, _ = convert_records(records)

    again = hashlib.sha256(f"{TRACE}/{SHARED}/api/10.0.0.2//8080/1".encode()).hexdigest()[:16]
    assert only(spans, service="api", kind=2)["spanId"] == again
    assert only(spans, spanId=taken)["name"] == "holds the derived id"
