"""The span frame every analysis function reads, and access to its attributes.

Input contract (what ``storage.reader.ClickHouseTraceReader.trace`` returns, for one trace or many stacked):

==========================  ==========================================================================
column                      dtype and meaning
==========================  ==========================================================================
``trace_id``                String, lowercase hex (32 chars)
``span_id``                 String, lowercase hex (16 chars)
``parent_span_id``          String, ``""`` (or null) for a root
``name``                    String, the span name (operation)
``service_name``            String
``kind``                    String: ``Server``, ``Client``, ``Internal``, ``Producer``, ``Consumer``,
                            ``Unspecified`` (the older ``SPAN_KIND_SERVER`` spelling is accepted)
``start_time_unix_nano``    Int64, **ns** since the Unix epoch
``end_time_unix_nano``      Int64, **ns** since the Unix epoch, ``>= start``
``attributes``              Map(String, String), or List(Struct{key: String, value: String}); values are
                            the stored strings (numbers as decimal text)
``link_span_ids``           optional List(String): the spans this span links to
``link_trace_ids``          optional List(String), parallel to ``link_span_ids``
``link_attributes``         optional List(Map(String, String)), parallel to ``link_span_ids``
==========================  ==========================================================================

Other columns are carried along and ignored.
"""

from __future__ import annotations

from typing import Literal, get_args

import polars as pl

REQUIRED_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "service_name",
    "kind",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "attributes",
)
LINK_COLUMNS = ("link_trace_ids", "link_span_ids", "link_attributes")
ATTRIBUTES = pl.Map(pl.String, pl.String)
SpanKind = Literal["Server", "Client", "Internal", "Producer", "Consumer", "Unspecified"]
SPAN_KINDS: tuple[SpanKind, ...] = get_args(SpanKind)


def prepare_spans(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the contract's dtypes: attributes as ``Map(String, String)``, ``parent_span_id``
    ``""`` for roots, kinds in the ``Server`` spelling, times as Int64 ns, and the link columns present
    (empty lists when the input has none).

    Raises:
        ValueError: a required column is missing (the message names every missing one), or a span ends
            before it starts.
    """
    missing = [name for name in REQUIRED_COLUMNS if name not in frame.columns]
    if missing:
        raise ValueError(f"span frame lacks required column(s) {missing}; see analysis.spans for the contract")
    prepared = frame.with_columns(
        pl.col("parent_span_id").fill_null(""),
        pl.col("kind").str.replace(r"^SPAN_KIND_", "").str.to_titlecase(),
        pl.col("start_time_unix_nano").cast(pl.Int64),
        pl.col("end_time_unix_nano").cast(pl.Int64),
        _as_map(frame, "attributes"),
    )
    for name in LINK_COLUMNS:
        dtype = pl.List(ATTRIBUTES) if name == "link_attributes" else pl.List(pl.String)
        if name not in frame.columns:
            prepared = prepared.with_columns(pl.lit([], dtype=dtype).alias(name))
        elif frame.schema[name] != dtype:
            prepared = prepared.with_columns(pl.col(name).cast(dtype))
    if prepared.height and (prepared["end_time_unix_nano"] < prepared["start_time_unix_nano"]).any():
        raise ValueError("span frame has spans whose end_time_unix_nano is before start_time_unix_nano")
    return prepared


def _as_map(frame: pl.DataFrame, name: str) -> pl.Expr:
    # The reader returns a Map; frames built from Arrow ``list<struct<key, value>>`` cast to one losslessly.
    column = pl.col(name)
    return column if frame.schema[name] == ATTRIBUTES else column.cast(ATTRIBUTES)


def attribute(key: str, column: str = "attributes") -> pl.Expr:
    """The value of attribute ``key`` as String (null where absent), from a prepared frame."""
    return pl.col(column).map.get(key)


LARGEST_WHOLE = 2**53
"""The largest count or duration (ns) an attribute may give: past 2^53 a double no longer holds every integer, and
nothing real reaches it (2^53 ns is 104 days; a model call of 2^53 tokens does not exist). Larger values come from
broken exporters, such as the NaN or infinite token usage some SDKs report (vercel/ai issues 2543, 4929)."""


def whole_number(value: pl.Expr, scale: float = 1.0) -> pl.Expr:
    """``value`` (Float64) times ``scale``, rounded, as Int64; null where it is null, NaN, infinite, negative or
    over :data:`LARGEST_WHOLE`, so one broken attribute leaves its number unknown instead of failing the trace's
    analysis (a strict cast raises on the whole column)."""
    scaled = (value * scale).round()
    usable = scaled.is_finite() & (scaled >= 0) & (scaled <= LARGEST_WHOLE)
    return pl.when(usable).then(scaled).cast(pl.Int64)


def seconds_attribute_ns(key: str) -> pl.Expr:
    """A seconds-valued attribute (vLLM's ``gen_ai.latency.*``) as Int64 **ns**, rounded; null where absent,
    unparseable or out of :func:`whole_number`'s range."""
    return whole_number(attribute(key).cast(pl.Float64, strict=False), 1e9)


def integer_attribute(key: str) -> pl.Expr:
    """An integer-valued attribute (token counts) as Int64; null where absent, unparseable or out of
    :func:`whole_number`'s range."""
    return whole_number(attribute(key).cast(pl.Float64, strict=False))
