"""Random and edge-case OTLP requests shared by the tests of the Python reference (collector.batch.to_batch,
test_batch.py) and of the compiled scanner held to it (test_native_rows.py).

The random requests are mostly invalid on purpose (small pools of IDs and times, out-of-range enums,
repeated keys): they exercise rejections, duplicates, warnings and limits as much as stored rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from collector.batch import EARLIEST_PLAUSIBLE_NS


def kv(key: str, value: AnyValue) -> common_pb2.KeyValue:
    """One attribute."""
    return common_pb2.KeyValue(key=key, value=value)


def span(span_id: int, **fields: object) -> trace_pb2.Span:
    """A valid span with ID ``span_id`` of one fixed trace, ``fields`` overriding its defaults."""
    base: dict[str, object] = {
        "trace_id": bytes.fromhex("5b8efff798038103d269b633813fc60c"),
        "span_id": span_id.to_bytes(8, "big"),
        "name": "op",
        "kind": 2,
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_001_000_000,
    }
    base.update(fields)
    return trace_pb2.Span(**base)  # type: ignore[arg-type]


def request(*spans: trace_pb2.Span, resource: Sequence[common_pb2.KeyValue] | None = None) -> ExportTraceServiceRequest:
    """One resource (``service.name`` 'svc' unless ``resource`` is given) and one scope holding ``spans``."""
    attributes = resource if resource is not None else [kv("service.name", AnyValue(string_value="svc"))]
    return ExportTraceServiceRequest(
        resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=attributes),
                scope_spans=[trace_pb2.ScopeSpans(scope=common_pb2.InstrumentationScope(name="lib"), spans=spans)],
            )
        ]
    )


EDGE_VALUES = [
    # Attribute values at the edges of the stringification rules (collector.attributes).
    AnyValue(string_value="plain"),
    AnyValue(string_value='quote " backslash \\ nul \x00 tab \t del \x7f é 😀 \u2028'),
    AnyValue(bool_value=False),
    AnyValue(int_value=-(2**63)),
    AnyValue(double_value=1e-7),
    AnyValue(double_value=-0.0),
    AnyValue(double_value=math.nan),
    AnyValue(double_value=-math.inf),
    AnyValue(double_value=1e21),
    AnyValue(double_value=123456.789),
    AnyValue(bytes_value=b"\x00\xff"),
    AnyValue(),
    AnyValue(
        array_value=common_pb2.ArrayValue(
            values=[
                AnyValue(string_value='x"\n'),
                AnyValue(double_value=1.0),
                AnyValue(double_value=1e16),
                AnyValue(double_value=math.inf),
                AnyValue(int_value=3),
                AnyValue(bool_value=True),
                AnyValue(bytes_value=b"\x01"),
                AnyValue(),
            ]
        )
    ),
    AnyValue(kvlist_value=common_pb2.KeyValueList(values=[kv("k\x01", AnyValue(double_value=0.1))])),
    AnyValue(kvlist_value=common_pb2.KeyValueList(values=[kv("a", AnyValue()), kv("a", AnyValue(int_value=1))])),
    AnyValue(
        array_value=common_pb2.ArrayValue(
            values=[AnyValue(array_value=common_pb2.ArrayValue(values=[AnyValue(string_value="deep")]))]
        )
    ),
]


@st.composite
def values(draw: st.DrawFn, depth: int = 0) -> AnyValue:
    """Any AnyValue: scalars, arrays and key-value lists nested two deep."""
    scalar = st.one_of(
        st.builds(lambda s: AnyValue(string_value=s), st.text(max_size=8)),
        st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
        st.builds(lambda i: AnyValue(int_value=i), st.integers(-(2**63), 2**63 - 1)),
        st.builds(lambda d: AnyValue(double_value=d), st.floats(allow_nan=True, allow_infinity=True)),
        st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=4)),
        st.just(AnyValue()),
    )
    if depth >= 2:
        return draw(scalar)
    kind = draw(st.integers(0, 5))
    if kind == 0:
        items = draw(st.lists(values(depth + 1), max_size=3))
        return AnyValue(array_value=common_pb2.ArrayValue(values=items))
    if kind == 1:
        keys = draw(st.lists(st.sampled_from(["a", "b", "é"]), max_size=3))
        items = [kv(key, draw(values(depth + 1))) for key in keys]
        return AnyValue(kvlist_value=common_pb2.KeyValueList(values=items))
    return draw(scalar)


attributes = st.lists(st.builds(kv, st.sampled_from(["service.name", "k", "l", "m", "n"]), values()), max_size=5)
ids16 = st.sampled_from([b"", bytes(16), bytes(8), b"\x01" * 8, b"\x02" * 16, b"\x03" * 16, b"\x04" * 5])
ids8 = st.sampled_from([b"", bytes(8), b"\x01" * 8, b"\x02" * 8, b"\x05" * 3])
times = st.sampled_from([0, 1, 5, 1_700_000_000_000_000_000, 2**63 - 1, 2**63, 2**64 - 1])
spans = st.builds(
    trace_pb2.Span,
    trace_id=ids16,
    span_id=ids8,
    parent_span_id=ids8,
    trace_state=st.text(max_size=3),
    name=st.text(max_size=4),
    kind=st.integers(-1, 6),
    start_time_unix_nano=times,
    end_time_unix_nano=times,
    attributes=attributes,
    events=st.lists(
        st.builds(trace_pb2.Span.Event, time_unix_nano=times, name=st.text(max_size=3), attributes=attributes),
        max_size=3,
    ),
    links=st.lists(st.builds(trace_pb2.Span.Link, trace_id=ids16, span_id=ids8, attributes=attributes), max_size=2),
    status=st.builds(trace_pb2.Status, code=st.integers(-1, 3), message=st.text(max_size=3)),
)
requests = st.builds(
    trace_service_pb2.ExportTraceServiceRequest,
    resource_spans=st.lists(
        st.builds(
            trace_pb2.ResourceSpans,
            resource=st.builds(resource_pb2.Resource, attributes=attributes),
            scope_spans=st.lists(
                st.builds(
                    trace_pb2.ScopeSpans,
                    scope=st.builds(common_pb2.InstrumentationScope, name=st.text(max_size=3)),
                    spans=st.lists(spans, max_size=4),
                ),
                max_size=2,
            ),
        ),
        max_size=2,
    ),
)


# Requests whose spans are valid and whose values have the usual shapes: most convert without any
# rejection, warning or truncation, so the paths that handle only such requests are exercised too.
_nonzero_ids16 = st.one_of(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8)).filter(any)
_nonzero_ids8 = st.binary(min_size=8, max_size=8).filter(any)
_valid_times = st.integers(EARLIEST_PLAUSIBLE_NS, 2**63 - 1)
_scalars = st.one_of(
    st.builds(lambda s: AnyValue(string_value=s), st.text(max_size=12)),
    st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
    st.builds(lambda i: AnyValue(int_value=i), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda d: AnyValue(double_value=d), st.floats(allow_nan=True, allow_infinity=True)),
    st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=7)),
    st.just(AnyValue()),
)
plain_values = st.one_of(
    _scalars,
    st.builds(lambda items: AnyValue(array_value=common_pb2.ArrayValue(values=items)), st.lists(_scalars, max_size=4)),
)
"""Scalars and arrays of scalars."""
_plain_attributes = st.lists(st.builds(kv, st.text(max_size=6), plain_values), max_size=6)


@st.composite
def _valid_span(draw: st.DrawFn) -> trace_pb2.Span:
    start = draw(_valid_times)
    return trace_pb2.Span(
        trace_id=draw(_nonzero_ids16),
        span_id=draw(_nonzero_ids8),
        parent_span_id=draw(st.one_of(st.just(b""), _nonzero_ids8)),
        trace_state=draw(st.text(max_size=5)),
        name=draw(st.text(max_size=6)),
        kind=draw(st.integers(0, 5)),
        start_time_unix_nano=start,
        end_time_unix_nano=draw(st.integers(start, 2**63 - 1)),
        attributes=draw(_plain_attributes),
        events=draw(
            st.lists(
                st.builds(
                    trace_pb2.Span.Event,
                    time_unix_nano=st.integers(0, 2**63 - 1),
                    name=st.text(max_size=4),
                    attributes=_plain_attributes,
                ),
                max_size=3,
            )
        ),
        links=draw(
            st.lists(
                st.builds(
                    trace_pb2.Span.Link,
                    trace_id=_nonzero_ids16,
                    span_id=_nonzero_ids8,
                    trace_state=st.text(max_size=3),
                    attributes=_plain_attributes,
                ),
                max_size=2,
            )
        ),
        status=trace_pb2.Status(code=draw(st.integers(0, 2)), message=draw(st.text(max_size=4))),
    )


@st.composite
def _named_resource(draw: st.DrawFn) -> resource_pb2.Resource:
    keys = draw(st.lists(st.text(max_size=5).filter(lambda k: k != "service.name"), unique=True, max_size=4))
    items = [kv(key, draw(plain_values)) for key in keys]
    items.insert(draw(st.integers(0, len(items))), kv("service.name", AnyValue(string_value=draw(st.text(min_size=1)))))
    return resource_pb2.Resource(attributes=items)


valid_requests = st.builds(
    trace_service_pb2.ExportTraceServiceRequest,
    resource_spans=st.lists(
        st.builds(
            trace_pb2.ResourceSpans,
            resource=_named_resource(),
            scope_spans=st.lists(
                st.builds(
                    trace_pb2.ScopeSpans,
                    scope=st.builds(
                        common_pb2.InstrumentationScope, name=st.text(max_size=4), version=st.text(max_size=3)
                    ),
                    spans=st.lists(_valid_span(), max_size=4),
                ),
                max_size=2,
            ),
        ),
        max_size=3,
    ),
)
"""Valid spans (IDs, times, enums), named resources with distinct keys, values of :data:`plain_values`."""
