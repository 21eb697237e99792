"""Zipkin v2 JSON → OTLP JSON on the shared Zipkin files, values checked by hand against the source JSON."""

from __future__ import annotations

import json
from pathlib import Path

from zipkin_kit import attributes, converted, only, server_half_id

from collector.formats import Payload, Rejected, detect_format, read_payloads

ZIPKIN = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces" / "zipkin"


def test_missing_duration_annotations_and_remote_service() -> None:
    span = only(converted(ZIPKIN / "zipkin__netflix.json"), spanId="8f6bc3f30fa5b0bf")

    assert span["traceId"] == "5982fe77008310cc80f1da5e10147517"
    assert span["parentSpanId"] == "90394f6bcffb5d13"
    assert span["service"] == "apip"
    assert span["kind"] == 3  # CLIENT
    # timestamp 1516781775721000 µs, no duration: a zero-length span
    assert span["startTimeUnixNano"] == span["endTimeUnixNano"] == "1516781775721000000"
    assert span["events"] == [
        {"timeUnixNano": "1516781775721000000", "name": "EVCACHE_G"},
        {"timeUnixNano": "1516781775721000000", "name": "salp.hystrix"},
    ]
    assert attributes(span)["peer.service"] == {"stringValue": "evcache_g"}
    assert attributes(span)["customer_id"] == {"stringValue": "-1"}  # tags stay strings


def test_error_tag_shared_server_span_and_peer_address() -> None:
    spans = converted(ZIPKIN / "zipkin__smartthings-oauth-authorization.json")

    # The client (stlogin) and the shared server side (auth) of one RPC carry one span ID, as Zipkin's
    # B3 single-span RPCs do; the server side gets an ID of its own under the client (test_formats_zipkin_shared.py).
    server = only(spans, parentSpanId="c47bff7f7964b321", service="auth")
    assert server["traceId"] == "00000000000000008ce82b2e9ed820ba"  # 64-bit, padded
    assert server["kind"] == 2
    assert (server["startTimeUnixNano"], server["endTimeUnixNano"]) == (
        "1543334661606025000",
        "1543334661609066000",
    )
    assert server["status"] == {"code": 2, "message": "401"}  # tags.error = "401"
    assert attributes(server) == {
        "http.path": {"stringValue": "/sso/authenticate"},
        "http.status_code": {"stringValue": "401"},
        "network.local.address": {"stringValue": "10.0.0.63"},
        "network.local.port": {"intValue": "8180"},
        "network.peer.address": {"stringValue": "52.0.0.9"},
        "network.peer.port": {"intValue": "51436"},
        "zipkin.shared": {"boolValue": True},
        "zipkin.original_span_id": {"stringValue": "c47bff7f7964b321"},
    }
    client = only(spans, spanId="c47bff7f7964b321", service="stlogin")
    assert client["kind"] == 3
    assert client["status"] == {"code": 2, "message": "401"}


def test_client_remote_endpoint_is_the_server() -> None:
    span = only(converted(ZIPKIN / "zipkin__smartthings-oauth-authorization.json"), spanId="c8a2bcb3011b9fcd")

    assert span["kind"] == 3
    assert {key: value for key, value in attributes(span).items() if key.startswith(("server.", "network.peer"))} == {
        "network.peer.address": {"stringValue": "10.0.0.3"},
        "network.peer.port": {"intValue": "9042"},
        "server.address": {"stringValue": "10.0.0.3"},
        "server.port": {"intValue": "9042"},
    }
    assert attributes(span)["peer.service"] == {"stringValue": "auth"}


def test_remote_port_without_address_and_ipv6_peer() -> None:
    yelp = only(converted(ZIPKIN / "zipkin__yelp.json"), spanId="15fc03927f0f68df")
    messaging = converted(ZIPKIN / "zipkin__messaging.json")
    server = only(messaging, spanId="b33447baae403ed6")

    assert {key: attributes(yelp)[key] for key in ("peer.service", "network.peer.port", "server.port")} == {
        "peer.service": {"stringValue": "blt"},
        "network.peer.port": {"intValue": "31882"},
        "server.port": {"intValue": "31882"},
    }
    assert "server.address" not in attributes(yelp)
    assert attributes(server)["network.peer.address"] == {"stringValue": "::1"}
    assert "server.address" not in attributes(server)  # a SERVER span's remote side is the client


def test_messaging_kinds_and_empty_error_tag() -> None:
    messaging = converted(ZIPKIN / "zipkin__messaging.json")
    kafka = converted(ZIPKIN / "zipkin__messaging-kafka.json")

    assert only(messaging, spanId="05e3ac9a4f6e3b90")["kind"] == 4  # PRODUCER
    consumer = only(messaging, spanId="e457b5a2e4d86bd1")
    assert consumer["kind"] == 5  # CONSUMER
    assert (consumer["startTimeUnixNano"], consumer["endTimeUnixNano"]) == (
        "1521186011929043000",
        "1521186011929057000",
    )
    failed = only(kafka, spanId="568b33e6af8a225a")  # tags.error = "", no kind
    assert failed["kind"] == 0
    assert failed["status"] == {"code": 2}
    assert "error" not in attributes(failed)
    assert only(kafka, spanId="2f77d5b0b8e0de35")["status"] == {"code": 2, "message": "some error"}


def test_span_without_local_service_is_unknown_service() -> None:
    [span] = converted(ZIPKIN / "zipkin__envoy.json")

    assert span["service"] == "unknown_service"
    assert span["traceId"] == "0000000000000000978883983d506fa5"
    assert "parentSpanId" not in span
    assert attributes(span)["zipkin.shared"] == {"boolValue": True}
    assert attributes(span)["network.local.address"] == {"stringValue": "169.254.65.45"}


def test_span_without_timestamp_is_rejected_and_the_others_kept(tmp_path: Path) -> None:
    spans = json.loads((ZIPKIN / "zipkin__messaging.json").read_text())
    del spans[1]["timestamp"]
    path = tmp_path / "no-timestamp.json"
    path.write_text(json.dumps(spans))

    items = list(read_payloads(path))

    reason = f"span {spans[1]['id']} has no timestamp, and no other record of it in the file has one"
    assert items[0] == Rejected(f"{path}#/1", reason, 1)
    assert [type(item) for item in items[1:]] == [Payload]
    assert len(converted_payload_spans(items[1])) == 3


def test_list_of_traces_as_the_zipkin_api_returns(tmp_path: Path) -> None:
    path = tmp_path / "traces.json"
    path.write_text(
        json.dumps(
            [json.loads((ZIPKIN / name).read_text()) for name in ("zipkin__messaging.json", "zipkin__yelp.json")]
        )
    )

    assert detect_format(path) == "zipkin"
    assert len(converted(path)) == 4 + 16


def converted_payload_spans(payload: Payload) -> list[dict]:
    assert isinstance(payload.body, dict)
    return [span for rs in payload.body["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def test_netflix_pieces_of_the_api_client_span_merge_into_one() -> None:
    # Three records carry span 6c59056709a0b1e4 on the client side: the api CLIENT record and two records
    # without kind or local endpoint (NIWS and Hystrix details). Zipkin merges them into the client half; the
    # SERVER record of session_logs is the server half, shared though its `shared` flag is missing.
    trace_id = "5982fe77008310cc80f1da5e10147517"
    raw = json.loads((ZIPKIN / "zipkin__netflix.json").read_text())
    pieces = [record for record in raw if record["id"] == "6c59056709a0b1e4" and record.get("kind") != "SERVER"]
    spans = converted(ZIPKIN / "zipkin__netflix.json")

    client = only(spans, spanId="6c59056709a0b1e4")
    tags = {key: {"stringValue": value} for piece in pieces for key, value in piece["tags"].items()}
    assert len(pieces) == 3 and len(tags) > len(pieces[0]["tags"])
    assert attributes(client) == {
        **tags,
        "peer.service": {"stringValue": "session_logs"},
        "zipkin.merged_records": {"intValue": "3"},
    }
    annotations = sorted({(a["timestamp"], a["value"]) for piece in pieces for a in piece.get("annotations", [])})
    assert client["events"] == [{"timeUnixNano": f"{us}000", "name": value} for us, value in annotations]
    assert (client["kind"], client["service"], client["name"]) == (3, "api", "/m/n/2.6.1")
    assert (client["startTimeUnixNano"], client["endTimeUnixNano"]) == ("1516781775742000000", "1516781775750000000")

    api_server = server_half_id(trace_id, "67fae42571535f60", {"serviceName": "api"})
    session_logs = server_half_id(trace_id, "6c59056709a0b1e4", {"serviceName": "session_logs"})
    assert client["parentSpanId"] == api_server  # the api server half's child, not apip's client half
    assert only(spans, spanId=api_server)["parentSpanId"] == "67fae42571535f60"
    server = only(spans, spanId=session_logs)
    assert server["parentSpanId"] == "6c59056709a0b1e4"
    assert attributes(server)["zipkin.original_span_id"] == {"stringValue": "6c59056709a0b1e4"}
    assert len(spans) == 6 and "unknown_service" not in {span["service"] for span in spans}
