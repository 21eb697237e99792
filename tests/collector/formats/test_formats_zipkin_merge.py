"""Records that report one Zipkin span in pieces, merged as `collector/formats/zipkin_merge.py` documents."""

from __future__ import annotations

from typing import Any

from zipkin_kit import attributes, convert_records, only, server_half_id

from collector.formats import Rejected

TRACE = "00000000000000000000000000000abc"


def record(span_id: str = "00000000000000b1", **fields: Any) -> dict[str, Any]:
    """A Zipkin v2 record of trace `abc`; `fields` are its other JSON fields."""
    return {"traceId": "abc", "id": span_id, **fields}


def test_pieces_merge_tags_annotations_and_endpoints() -> None:
    spans, rejected = convert_records(
        [
            record(
                kind="CLIENT",
                name="get",
                timestamp=1_000,
                duration=50,
                localEndpoint={"serviceName": "web"},
                remoteEndpoint={"serviceName": "db"},
                tags={"a": "1"},
                annotations=[{"timestamp": 1_020, "value": "wr"}, {"timestamp": 1_010, "value": "ws"}],
            ),
            # A late piece: no kind, no timestamp, no local endpoint.
            record(
                tags={"b": "2"},
                remoteEndpoint={"ipv4": "10.0.0.9", "port": 5432},
                annotations=[{"timestamp": 1_010, "value": "ws"}, {"timestamp": 1_010, "value": "cs"}],
            ),
        ]
    )

    assert rejected == []
    [span] = spans
    assert (span["kind"], span["name"], span["service"]) == (3, "get", "web")
    assert (span["startTimeUnixNano"], span["endTimeUnixNano"]) == ("1000000", "1050000")
    assert attributes(span) == {
        "a": {"stringValue": "1"},
        "b": {"stringValue": "2"},
        # The remote endpoint is filled field by field from both pieces.
        "network.peer.address": {"stringValue": "10.0.0.9"},
        "network.peer.port": {"intValue": "5432"},
        "peer.service": {"stringValue": "db"},
        "server.address": {"stringValue": "10.0.0.9"},
        "server.port": {"intValue": "5432"},
        "zipkin.merged_records": {"intValue": "2"},
    }
    # Sorted by time, then value; the duplicate "ws" once.
    assert [(event["timeUnixNano"], event["name"]) for event in span["events"]] == [
        ("1010000", "cs"),
        ("1010000", "ws"),
        ("1020000", "wr"),
    ]


def test_conflicting_values_first_record_wins_except_tags() -> None:
    # Merge order is Zipkin's, not file order: the CLIENT record comes first although it is second in the file.
    spans, _ = convert_records(
        [
            record(name="late", timestamp=2_000, duration=10, tags={"k": "late", "only.late": "x"}),
            record(
                kind="CLIENT",
                name="first",
                timestamp=1_000,
                duration=50,
                localEndpoint={"serviceName": "web", "port": 8080},
                tags={"k": "first"},
            ),
        ]
    )

    [span] = spans
    assert (span["name"], span["startTimeUnixNano"], span["endTimeUnixNano"]) == ("first", "1000000", "1050000")
    # Zipkin copies the later record's tags over the first's.
    assert attributes(span)["k"] == {"stringValue": "late"}
    assert attributes(span)["only.late"] == {"stringValue": "x"}


def test_a_span_without_any_timestamp_is_rejected_alone() -> None:
    spans, rejected = convert_records(
        [
            record("00000000000000c1", name="orphan piece", tags={"x": "1"}),
            record("00000000000000d1", kind="SERVER", timestamp=5_000, duration=1, localEndpoint={"serviceName": "s"}),
            record("00000000000000c1", tags={"y": "2"}),
            record("00000000000000e1", name="zero", timestamp=0),  # Zipkin reads 0 as no timestamp
        ]
    )

    assert [span["spanId"] for span in spans] == ["00000000000000d1"]
    assert rejected == [
        Rejected("t.json#/0", "span 00000000000000c1 has no timestamp in any of its 2 records (also t.json#/2)", 1),
        Rejected(
            "t.json#/3", "span 00000000000000e1 has no timestamp, and no other record of it in the file has one", 1
        ),
    ]


def test_records_of_different_hosts_stay_apart() -> None:
    # Same span ID, not shared, conflicting local endpoints, neither a late fragment: two records, as in Zipkin.
    spans, _ = convert_records(
        [
            record(kind="PRODUCER", timestamp=1_000, localEndpoint={"serviceName": "a", "ipv4": "10.0.0.1"}),
            record(kind="PRODUCER", timestamp=2_000, localEndpoint={"serviceName": "a", "ipv4": "10.0.0.2"}),
        ]
    )

    assert sorted(span["startTimeUnixNano"] for span in spans) == ["1000000", "2000000"]
    assert all("zipkin.merged_records" not in attributes(span) for span in spans)


def test_late_server_fragment_joins_the_shared_half_of_its_host() -> None:
    # Brave reports a server span's late rename as a record with only a name and the local endpoint (no kind,
    # no `shared`), as the smartthings capture shows; it belongs to the server half on that endpoint.
    platformapi = {"serviceName": "platformapi", "ipv4": "10.104.87.185", "port": 8140}
    spans, rejected = convert_records(
        [
            record(parentId="00000000000000a1", name="post done", localEndpoint=platformapi, tags={"late": "yes"}),
            record(
                parentId="00000000000000a1",
                kind="SERVER",
                name="post",
                timestamp=1_100,
                duration=80,
                localEndpoint=platformapi,
                shared=True,
            ),
            record(
                parentId="00000000000000a1",
                kind="CLIENT",
                name="post /done",
                timestamp=1_000,
                duration=100,
                localEndpoint={"serviceName": "strongman"},
            ),
        ]
    )

    assert rejected == []
    server = only(spans, service="platformapi")
    assert server["spanId"] == server_half_id(TRACE, "00000000000000b1", platformapi)
    assert server["name"] == "post"  # the shared record's own name comes first
    assert attributes(server)["late"] == {"stringValue": "yes"}
    assert attributes(server)["zipkin.merged_records"] == {"intValue": "2"}
    assert only(spans, service="strongman")["name"] == "post /done"


def test_server_record_after_a_client_is_shared_without_the_flag() -> None:
    # Zipkin backfills `shared` on a SERVER record right after a CLIENT record of the same ID.
    spans, _ = convert_records(
        [
            record(kind="SERVER", timestamp=1_100, duration=5, localEndpoint={"serviceName": "api"}),
            record(
                parentId="00000000000000a1",
                kind="CLIENT",
                timestamp=1_000,
                duration=10,
                localEndpoint={"serviceName": "web"},
            ),
        ]
    )

    server = only(spans, service="api")
    assert attributes(server)["zipkin.shared"] == {"boolValue": True}
    assert server["spanId"] == server_half_id(TRACE, "00000000000000b1", {"serviceName": "api"})
    assert server["parentSpanId"] == "00000000000000b1"
    assert only(spans, service="web")["parentSpanId"] == "00000000000000a1"


def test_shared_flag_on_a_client_record_is_ignored() -> None:
    spans, _ = convert_records(
        [record(kind="CLIENT", timestamp=1_000, localEndpoint={"serviceName": "web"}, shared=True)]
    )

    assert "zipkin.shared" not in attributes(only(spans, service="web"))
