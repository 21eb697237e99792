"""Parameter parsing of the Jaeger APIs without a server: Go durations, RFC 3339, windows, tags, tag types."""

from __future__ import annotations

import pytest

from api.jaeger import model, otlp, params
from api.jaeger.errors import JaegerError
from units.durations import MAX_DURATION_NS, DurationError, parse_go_duration

S = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("150ms", 150_000_000),
        ("1.5s", 1_500_000_000),
        ("2m", 120 * S),
        ("1h2m3.5s", 3723 * S + S // 2),
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("-1.5h", -5400 * S),
        ("1.s", S),  # digits before the point are enough
        (".5s", S // 2),  # and so are digits after it
        ("1us", 1_000),
        ("1µs", 1_000),  # micro sign U+00B5
        ("1μs", 1_000),  # Greek mu U+03BC
        ("3ns", 3),
        ("0.0000000019s", 1),  # truncated to whole ns, exactly (no float drift)
        ("1.0000000001s", S),
        ("9223372036854775807ns", MAX_DURATION_NS),
        ("2562047h47m16.854775807s", MAX_DURATION_NS),
        ("1h1h", 7200 * S),  # Go sums repeated units
    ],
)
def test_go_durations(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",  # only 0 may omit the unit
        "1d",  # no day unit in Go
        "1S",
        "1 s",
        " 1s",
        "1s ",
        ".s",
        ".",
        "s",
        "+",
        "--1s",
        "1h-2m",  # a sign only in front
        "1.2.3s",
        "1e3s",
        "١s",  # a non-ASCII digit
        "9223372036854775808ns",  # one past the int64 range
        "2562048h",
        "NaNs",
    ],
)
def test_go_duration_rejections(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_go_duration(text)


def test_duration_parameters_refuse_negative_and_name_the_parameter() -> None:
    assert params.duration_param(None, "minDuration") is None
    assert params.duration_param("", "minDuration") is None
    with pytest.raises(JaegerError, match=r"minDuration.*negative"):
        params.duration_param("-1s", "minDuration")
    with pytest.raises(JaegerError, match=r"'maxDuration'.*invalid duration"):
        params.duration_param("10 ms", "maxDuration")


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2024-10-30T12:24:00.218138154Z", 1730291040218138154),
        ("2024-10-30T14:24:00.218138154+02:00", 1730291040218138154),
        ("2024-10-30T14:24:00.218138154 02:00", 1730291040218138154),  # '+' form-decoded to a space
        ("2024-10-30t12:24:00.2z", 1730291040200000000),
        ("1960-01-01T00:00:00Z", 0),  # before the epoch: clamped, no span is older
        ("9999-12-31T23:59:59Z", params.MAX_NS),  # past DateTime64(9): clamped
    ],
)
def test_rfc3339(text: str, ns: int) -> None:
    assert params.rfc3339_ns(text, "query.startTimeMin") == ns


@pytest.mark.parametrize(
    "text", ["2024-10-30", "2024-10-30T12:24:00", "2024-10-30T12:24:00.1234567891Z", "2024-13-01T00:00:00Z", "x"]
)
def test_rfc3339_rejections(text: str) -> None:
    with pytest.raises(JaegerError, match=r"malformed parameter query\.startTimeMin"):
        params.rfc3339_ns(text, "query.startTimeMin")


def test_v1_window_defaults_and_lookback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(params, "now_ns", lambda: 10**18)
    assert params.v1_window(None, None, None) == (10**18 - 2 * 86_400 * S, 10**18)
    assert params.v1_window(None, None, "1h") == (10**18 - 3600 * S, 10**18)
    assert params.v1_window(None, 5 * 10**12, "2d") == (5 * 10**15 - 2 * 86_400 * S, 5 * 10**15)
    assert params.v1_window(7, 9, "custom") == (7_000, 9_000)
    assert params.v1_window(7, 9, "1h") == (7_000, 9_000)  # start given: lookback ignored, as Jaeger does
    assert params.v1_window(-5, 2**70, None) == (0, params.MAX_NS)  # clamped to what the store holds
    with pytest.raises(JaegerError, match="start time must be before end time"):
        params.v1_window(9, 7, None)
    with pytest.raises(JaegerError, match="lookback"):
        params.v1_window(None, None, "1 hour")


def test_v1_tags_and_derived_tag_filters() -> None:
    tags = params.v1_tags(["http.url:http://x:80/a", "error:true"], ['{"span.kind":"server","k":"v"}'])
    assert tags == {"http.url": "http://x:80/a", "error": "true", "span.kind": "server", "k": "v"}
    query = params.SearchFilters(
        service="s",
        operation=None,
        start_ns=0,
        end_ns=1,
        min_duration_ns=None,
        max_duration_ns=None,
        tags=tags,
        limit=20_000,
    ).to_query()
    assert query.status_code == "Error" and query.span_kind == "Server" and query.limit == params.MAX_TRACES
    assert query.attributes == (("http.url", "http://x:80/a"), ("k", "v"))
    for bad_tag, bad_json in ((["novalue"], []), ([], ["[1]"]), ([], ['{"a": 1}']), ([], ["{"])):
        with pytest.raises(JaegerError, match=r"malformed 'tags?' parameter"):
            params.v1_tags(bad_tag, bad_json)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", ("bool", True)),
        ("false", ("bool", False)),
        ("True", ("string", "True")),
        ("200", ("int64", 200)),
        ("-12", ("int64", -12)),
        ("0", ("int64", 0)),
        ("007", ("string", "007")),  # a leading zero would be lost
        ("+1", ("string", "+1")),
        ("-0", ("string", "-0")),
        ("9007199254740991", ("int64", 9007199254740991)),
        ("9007199254740992", ("int64", "9007199254740992")),  # beyond JavaScript's safe integers: as text
        ("9223372036854775807", ("int64", "9223372036854775807")),
        ("9223372036854775808", ("string", "9223372036854775808")),  # beyond int64
        ("72.5", ("float64", 72.5)),
        ("1e-07", ("float64", 1e-07)),
        ("1e+21", ("float64", 1e21)),
        ("72.50", ("string", "72.50")),  # a trailing zero would be lost
        ("1.0", ("string", "1.0")),
        ("0.1000000000000000055", ("string", "0.1000000000000000055")),  # more digits than a double holds
        ("1e-400", ("string", "1e-400")),
        ("NaN", ("string", "NaN")),
        ("+Inf", ("string", "+Inf")),
        ("", ("string", "")),
        ("[1,2]", ("string", "[1,2]")),
    ],
)
def test_tag_type_inference_is_conservative(text: str, expected: tuple[str, object]) -> None:
    assert model.typed_value(text) == expected
    value_type, value = expected
    any_value = otlp.any_value(text)
    if value_type == "string":
        assert any_value == {"stringValue": text}
    elif value_type == "int64":
        assert any_value == {"intValue": text}  # proto3 JSON writes int64 as a decimal string
    else:
        assert any_value in ({"boolValue": value}, {"doubleValue": value})


def test_operations_kind_filter_and_unspecified_spelling() -> None:
    pairs = [("a", "Server"), ("b", "Client"), ("c", "Unspecified"), ("d", "Internal")]
    assert [(o.name, o.spanKind) for o in model.operations(pairs, None)] == [
        ("a", "server"),
        ("b", "client"),
        ("c", ""),
        ("d", "internal"),
    ]
    assert [o.name for o in model.operations(pairs, "SERVER")] == ["a"]
    assert [o.name for o in model.operations(pairs, "unspecified")] == ["c"]
    assert model.operations(pairs, "bogus") == []
    assert model.operations(pairs, "unspecified", unspecified="internal")[0].spanKind == "internal"
