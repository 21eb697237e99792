"""Batch files (:mod:`collector.wire`): what is written reads back as it was, and broken files are refused."""

from __future__ import annotations

import io

import pytest

from collector.wire import REQUEST_INDEX_FIELD, TENANT_FIELD, WireError, encode_varint, read_batch, write_batch


def marker(index: int) -> bytes:
    """The bytes that open request ``index``'s appended fields (its index, then its tenant's key)."""
    return encode_varint(REQUEST_INDEX_FIELD << 3) + encode_varint(index) + encode_varint(TENANT_FIELD << 3 | 2)


def written(requests: list[tuple[bytes, str]], first_index: int = 0) -> bytes:
    out = io.BytesIO()
    assert write_batch(out, requests, first_index=first_index) == len(requests)
    return out.getvalue()


def test_requests_read_back_as_written_whatever_their_bytes() -> None:
    """Empty bodies, bodies that hold a frame's own field bytes, tenants of any length and script."""
    requests = [
        (b"", "default"),
        (b"\x0a\x02ab" + marker(1) + encode_varint(4) + b"fake", "acme"),
        (bytes(range(256)) * 300, "t" * 200),
        (b"\xff", "équipe-東京"),
    ]

    assert read_batch(written(requests)) == requests


def test_a_group_of_segments_keeps_its_requests_in_order() -> None:
    """Segments re-framed into one group file, as the ingest pipeline's inserter does (indexes continue)."""
    first, second = [(b"a", "x"), (b"b", "y")], [(b"c", "x")]
    group = io.BytesIO()
    count = write_batch(group, read_batch(written(first)))
    write_batch(group, read_batch(written(second)), first_index=count)

    assert read_batch(group.getvalue()) == first + second


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (written([(b"abc", "t")])[:-1], "truncated"),
        (encode_varint(3) + b"abc", "lacks its index field"),
        (written([(b"abc", "t")], first_index=1), "lacks its index field"),
        (b"\xff" * 11, "varint"),
        (encode_varint(3 + len(marker(0)) + 3) + b"abc" + marker(0) + encode_varint(5) + b"ab", "end with its tenant"),
        (encode_varint(3 + len(marker(0)) + 4) + b"abc" + marker(0) + encode_varint(1) + b"abc", "end with its tenant"),
    ],
)
def test_broken_batch_files_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        read_batch(data)
