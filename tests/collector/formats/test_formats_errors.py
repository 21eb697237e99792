"""Bad input: whole files that cannot be imported raise FormatError naming the file (never another
exception type); bad lines and spans inside a usable file become `Rejected` items while the rest is read."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.formats import FormatError, Payload, Rejected, detect_format, read_payloads
from collector.formats.console import concatenated_values

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces"
TESTDATA = Path(__file__).resolve().parent / "testdata"


def write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def format_error(path: Path) -> str:
    """The FormatError message for `path`, checked to be raised alike by both entry points."""
    with pytest.raises(FormatError) as from_detect:
        detect_format(path)
    with pytest.raises(FormatError) as from_read:
        read_payloads(path)  # raised when called, before any iteration
    assert str(from_detect.value) == str(from_read.value)
    assert str(path) in str(from_read.value)
    return str(from_read.value)


@pytest.mark.parametrize("content", [b"", b"  \n\t\n", b"\xef\xbb\xbf\n"], ids=["empty", "blank", "bom"])
def test_empty_file(tmp_path: Path, content: bytes) -> None:
    assert "empty" in format_error(write(tmp_path, "empty.json", content))


@pytest.mark.parametrize(
    "name", ["zipkin/zipkin__yelp.json", "jaeger/tracecompass__opentracing_multiple_services.json"]
)
def test_truncated_json(tmp_path: Path, name: str) -> None:
    text = (TRACES / name).read_text()

    message = format_error(write(tmp_path, "cut.json", text[: len(text) // 2]))

    assert "invalid JSON at line" in message
    assert "truncated" in message


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([1, 2, 3], "first element is a JSON number"),
        ([{"name": "not a span"}], "first element is an object with keys ['name']"),
        ([], "empty JSON array"),
        ({"hello": "world"}, "an object with keys ['hello']"),
        ("just a string", "a JSON string"),
        ({"resourceLogs": []}, "OTLP logs, not traces"),
    ],
)
def test_json_in_no_trace_format(tmp_path: Path, document: object, expected: str) -> None:
    assert expected in format_error(write(tmp_path, "other.json", json.dumps(document)))


def test_zipkin_v1_is_named(tmp_path: Path) -> None:
    v1 = [
        {
            "traceId": "5af7183fb1d4cf5f",
            "id": "352bff9a74ca9ad2",
            "name": "get",
            "timestamp": 1472470996199000,
            "annotations": [{"timestamp": 1472470996199000, "value": "sr", "endpoint": {"serviceName": "a"}}],
            "binaryAnnotations": [],
        }
    ]

    assert "Zipkin v1" in format_error(write(tmp_path, "v1.json", json.dumps(v1)))


@pytest.mark.parametrize("seed", range(64))
def test_random_bytes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    content = rng.randbytes(rng.choice([1, 2, 3, 7, 64, 4096]))

    format_error(write(tmp_path, "random.bin", content))


def test_random_bytes_behind_json_and_gzip_starts(tmp_path: Path) -> None:
    noise = random.Random(7).randbytes(512)

    assert "not UTF-8" in format_error(write(tmp_path, "brace.json", b"{" + noise))
    assert "gzip" in format_error(write(tmp_path, "fake.gz", b"\x1f\x8b" + noise))


def test_truncated_gzip(tmp_path: Path) -> None:
    packed = gzip.compress((TRACES / "zipkin" / "zipkin__yelp.json").read_bytes())

    assert "gzip data is corrupt or truncated" in format_error(write(tmp_path, "cut.json.gz", packed[:-20]))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert "cannot read" in format_error(tmp_path / "missing.json")
    assert "cannot read" in format_error(tmp_path)


def test_max_spans_per_payload_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        read_payloads(TRACES / "otlp" / "otelproto__trace.json", max_spans_per_payload=0)


def test_gzipped_files_are_read_by_content(tmp_path: Path) -> None:
    zipkin = TRACES / "zipkin" / "zipkin__yelp.json"
    protobuf = TRACES / "otlp" / "otlp2parquet__traces.pb"
    zipkin_gz = write(tmp_path, "spans.bin", gzip.compress(zipkin.read_bytes()))  # no telling extension
    protobuf_gz = write(tmp_path, "traces.pb.gz", gzip.compress(protobuf.read_bytes()))

    assert detect_format(zipkin_gz) == "zipkin"
    assert [p.body for p in read_payloads(zipkin_gz)] == [p.body for p in read_payloads(zipkin)]
    assert detect_format(protobuf_gz) == "otlp-protobuf"
    assert [p.body for p in read_payloads(protobuf_gz)] == [protobuf.read_bytes()]


def test_bad_json_lines_are_rejected_and_the_others_read(tmp_path: Path) -> None:
    lines = (TRACES / "otlp" / "otlp2parquet__traces.jsonl").read_text().splitlines()
    lines[0] = lines[0][:100]  # a broken first line does not hide the format
    lines[4] = json.dumps({"resourceLogs": []})
    lines.insert(6, "")
    path = write(tmp_path, "mixed.jsonl", "\n".join(lines) + "\n")

    items = list(read_payloads(path))

    assert detect_format(path) == "otlp-jsonl"
    assert [(item.source, type(item)) for item in items[:6]] == [
        (f"{path}:1", Rejected),
        (f"{path}:2", Payload),
        (f"{path}:3", Payload),
        (f"{path}:4", Payload),
        (f"{path}:5", Rejected),
        (f"{path}:6", Payload),
    ]
    assert items[0].reason == "not valid JSON at column 97: Unterminated string starting at"
    assert items[4] == Rejected(f"{path}:5", "not an OTLP trace export request (no 'resourceSpans')", None)
    assert len(items) == 19  # 17 payloads, 2 rejected lines, the blank line 7 skipped
    assert items[6].source == f"{path}:8"


def test_line_separator_inside_a_json_string_does_not_split_the_line(tmp_path: Path) -> None:
    lines = (TRACES / "otlp" / "otlp2parquet__traces.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace("product-catalog", "product\u2028catalog")
    path = write(tmp_path, "separator.jsonl", "\n".join(lines))

    items = list(read_payloads(path))

    assert len(items) == 19
    assert all(isinstance(item, Payload) for item in items)


def test_json_lines_of_something_else(tmp_path: Path) -> None:
    lines = [json.dumps({"timestamp": 1, "input_length": 2}), json.dumps({"timestamp": 3, "input_length": 4})]

    message = format_error(write(tmp_path, "other.jsonl", "\n".join(lines)))

    assert "line 1 is not an OTLP trace export request" in message


def test_bad_jaeger_tag_rejects_only_its_span(tmp_path: Path) -> None:
    trace = json.loads((TRACES / "jaeger" / "jaeger__ui_01.json").read_text())
    trace["spans"][1]["tags"][1]["value"] = "twenty-three"  # peer.ipv4, type int64
    path = write(tmp_path, "bad-tag.json", json.dumps(trace))

    items = list(read_payloads(path))

    assert items[0] == Rejected(
        f"{path}#/spans/1", "tags[1] (peer.ipv4) int64 value 'twenty-three' is not a 64-bit integer", 1
    )
    assert [type(item) for item in items[1:]] == [Payload]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)
JSON_FILES = sorted(
    [path for folder in ("jaeger", "zipkin", "otlp") for path in (TRACES / folder).glob("*.json")]
    + [path for path in TESTDATA.iterdir() if path.suffix in (".json", ".out") and not path.name.startswith("smart")]
)
"""The shared JSON files and this folder's fixtures of saved-file formats (testdata/README.md; not the Zipkin
excerpt, a format the shared files have and slow to fuzz); a `.out` ConsoleSpanExporter dump is damaged object by
object."""


def locations(value: object, at: tuple = ()) -> list[tuple]:
    """Every place in a JSON value, as a path of keys and indexes (the root is `()`)."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += locations(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += locations(item, (*at, index))
    return found


def replaced(document: Any, at: tuple, value: object) -> Any:
    """`document` with the value at `at` replaced (in place, except at the root)."""
    if not at:
        return value
    parent = document
    for step in at[:-1]:
        parent = parent[step]
    parent[at[-1]] = value
    return document


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(file=st.sampled_from(JSON_FILES), data=st.data())
def test_damaged_real_files_fail_only_as_format_error_or_rejected(
    tmp_path: Path, file: Path, data: st.DataObject
) -> None:
    text = file.read_text()
    printed = file.suffix == ".out"
    document: Any = [value for _, value in concatenated_values(text)] if printed else json.loads(text)
    for _ in range(data.draw(st.integers(1, 3))):
        document = replaced(document, data.draw(st.sampled_from(locations(document))), data.draw(JSON_VALUES))
    as_printed = printed and isinstance(document, list)
    path = write(tmp_path, "damaged", "\n".join(map(json.dumps, document)) if as_printed else json.dumps(document))

    try:
        items = list(read_payloads(path, max_spans_per_payload=2))
    except FormatError as exc:
        assert str(path) in str(exc)
    else:
        assert all(isinstance(item, Payload | Rejected) for item in items)
