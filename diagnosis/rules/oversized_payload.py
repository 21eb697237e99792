"""``oversized_payload``: calls move large request or response bodies without compression.

Trace signal, per span and direction (request, response):

- **Size** (bytes): the first of ``request_size_keys`` / ``response_size_keys`` the span carries (OTel semconv
  HTTP ``http.request.body.size`` / ``http.response.body.size``, the older ``http.request_content_length`` /
  ``http.response_content_length``, ``rpc.request.size`` / ``rpc.response.size``), or the largest message of
  the span's RPC message events (OTel semconv RPC: events ``rpc.message`` or the older ``message``, with
  ``rpc.message.type`` / ``message.type`` ``SENT`` or ``RECEIVED`` and ``*.uncompressed_size``,
  ``*.compressed_size``). A CLIENT span sends the request and receives the response; any other span the
  reverse. A message event's uncompressed size is the payload (the compressed size when that is all it has).
- **Compressed** when a ``Content-Encoding`` the span captured (``request_encoding_keys`` /
  ``response_encoding_keys``: ``http.response.header.content-encoding`` ...) names anything but ``identity``,
  when the older ``http.*_content_length_uncompressed`` exceeds the wire size, or when a message's compressed
  size is below its uncompressed size. A message whose compressed size equals its uncompressed size went
  uncompressed (gRPC reports both equal without a codec).

A payload at or above ``payload_bytes_warning`` that is not compressed is *oversized*. The cost reported is the
critical-path time of the spans that carry them (:func:`diagnosis.signals.subtree_critical_ns`), as a share of
end-to-end latency: where serialising, moving and parsing the bodies can hide, not the transfer alone. The
brief's incident was 1.8 MB gRPC responses sent without compression.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, subtree_critical_ns, top_traces

DIRECTIONS = ("request", "response")
SENT, RECEIVED = "SENT", "RECEIVED"
URL_KEYS = ("url.path", "http.target", "url.full", "http.url")
"""Where an HTTP span records its URL or path (OTel semconv HTTP, current and older names)."""


class OversizedPayloadConfig(RuleConfig):
    request_size_keys: list[str] = Field(description="Span attributes holding the request body's size, bytes.")
    response_size_keys: list[str] = Field(description="Span attributes holding the response body's size, bytes.")
    request_encoding_keys: list[str] = Field(description="Captured request Content-Encoding header attributes.")
    response_encoding_keys: list[str] = Field(description="Captured response Content-Encoding header attributes.")
    request_uncompressed_keys: list[str] = Field(
        description="Attributes with the request body's decoded size, bytes (older semconv's "
        "``http.request_content_length_uncompressed``): above the wire size means compressed."
    )
    response_uncompressed_keys: list[str] = Field(
        description="Attributes with the response body's decoded size, bytes (older semconv)."
    )
    message_event_names: list[str] = Field(description="Names of RPC message events (``rpc.message``, ``message``).")
    message_type_keys: list[str] = Field(description="Event attributes holding SENT or RECEIVED.")
    message_uncompressed_keys: list[str] = Field(description="Event attributes holding a message's size, bytes.")
    message_compressed_keys: list[str] = Field(
        description="Event attributes holding a message's compressed size, bytes."
    )
    payload_bytes_warning: int = Field(
        ge=1,
        description="Uncompressed body size from which a payload is oversized. 1 MiB: JSON and protobuf "
        "compress 3-10x, so a body this size costs milliseconds of transfer and parsing per call that a codec "
        "would mostly save. Bytes.",
    )
    payload_bytes_critical: int = Field(
        ge=1,
        description="Largest oversized payload that makes it critical. 4 MiB is gRPC's default maximum "
        "received message size: beyond it calls fail outright. Bytes.",
    )
    carrying_share_critical: float = Field(
        gt=0,
        le=1,
        description="Critical-path time of the spans carrying oversized payloads as a share (0..1) of "
        "end-to-end latency that makes it critical.",
    )
    min_payloads: int = Field(ge=1, description="Oversized payloads in the window needed to report. Count.")
    full_confidence_payloads: int = Field(
        ge=2, description="Oversized payloads at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _critical_above_warning(self) -> OversizedPayloadConfig:
        if self.payload_bytes_critical < self.payload_bytes_warning:
            raise ValueError("payload_bytes_critical must be at least payload_bytes_warning")
        return self


class OversizedPayload(Rule[OversizedPayloadConfig]):
    """See the module docstring."""

    cause = "oversized_payload"
    config_model = OversizedPayloadConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        payloads = self.payloads(ctx)
        oversized = payloads.filter((pl.col("payload_bytes") >= config.payload_bytes_warning) & ~pl.col("compressed"))
        if oversized.height < config.min_payloads:
            return None
        carrying = subtree_critical_ns(ctx.parent, ctx.spans, oversized["index"].unique().to_numpy())
        carrying_ns = float(carrying["wasted_ns"].sum())
        share = ctx.critical_share(carrying_ns)
        largest = int(oversized["payload_bytes"].max())  # type: ignore[arg-type]
        critical = largest >= config.payload_bytes_critical or share >= config.carrying_share_critical
        operations = (
            oversized.group_by("operation")
            .agg(pl.col("payload_bytes").max())
            .sort(["payload_bytes", "operation"], descending=[True, False])["operation"]
            .to_list()
        )
        directions = sorted(oversized["direction"].unique().to_list())
        median = float(oversized["payload_bytes"].median())  # type: ignore[arg-type]
        base = 0.7 + 0.3 * margin(median, config.payload_bytes_warning, config.payload_bytes_critical)
        return Finding(
            cause=self.cause,
            title=f"{oversized.height} uncompressed {'/'.join(directions)} bodies of {median / 1e6:.1f} MB (median) "
            f"in {operations[0]}; their spans carry {share:.0%} of latency",
            severity="critical" if critical else "warning",
            confidence=confidence(base, samples=oversized.height, full=config.full_confidence_payloads),
            evidence={
                "payload_count": payloads.height,
                "oversized_payload_count": oversized.height,
                "oversized_span_count": oversized["index"].n_unique(),
                "payload_bytes_p50": round(median),
                "payload_bytes_max": largest,
                "payload_bytes_total": int(oversized["payload_bytes"].sum()),
                "compressed_payload_count": int(payloads["compressed"].sum()),
                "direction_names": directions,
                "operation_names": operations,
                "carrying_ms_total": ms(carrying_ns),
                "carrying_share": ratio(share),
                "example_trace_ids": top_traces(oversized, "payload_bytes", EXAMPLE_TRACES),
            },
            remedy="Compress the bodies (gRPC: a gzip or zstd compressor on the channel or per call; HTTP: "
            "Content-Encoding gzip/br/zstd and Accept-Encoding on the client); better, send less: page or stream "
            "large results, return only the fields the caller reads, keep blobs (vectors, images, documents) "
            "behind references fetched when needed; raise the message size limit only as a last resort.",
        )

    def payloads(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """Every body a span reports, one row per span and direction. Columns: index (Int64, into
        ``ctx.spans``), trace_id, operation (``"<service> <span name>"``), direction (``request`` or
        ``response``), payload_bytes (Int64), compressed (Boolean). The operation of a span named by its
        method alone (an HTTP client's ``POST``) adds its URL's path."""
        config = self.config
        spans = ctx.spans
        frames = []
        for direction, sizes, encodings, decoded in (
            ("request", config.request_size_keys, config.request_encoding_keys, config.request_uncompressed_keys),
            ("response", config.response_size_keys, config.response_encoding_keys, config.response_uncompressed_keys),
        ):
            wire = first_attribute(sizes).cast(pl.Int64, strict=False)
            encoding = first_attribute(encodings).str.to_lowercase().str.replace_all(r"[\[\]'\" ]", "")
            compressed = (encoding.is_not_null() & ~encoding.is_in(["", "identity"])) | (
                first_attribute(decoded).cast(pl.Int64, strict=False) > wire
            )
            frames.append(
                spans.select(
                    "index",
                    "trace_id",
                    pl.lit(direction).alias("direction"),
                    wire.alias("payload_bytes"),
                    compressed.fill_null(False).alias("compressed"),
                ).drop_nulls("payload_bytes")
            )
        attributed = pl.concat(frames)
        messages = self._messages(ctx).join(
            attributed.select("index", "direction"), on=["index", "direction"], how="anti"
        )
        # A client span is often named by its method alone ("POST"): its URL's path tells the operation.
        path = first_attribute(URL_KEYS).str.replace(r"^[a-zA-Z]+://[^/]*", "").str.replace(r"\?.*$", "")
        named = pl.concat_str("service_name", pl.lit(" "), "name")
        operation = pl.when(path.is_not_null() & ~pl.col("name").str.contains("/")).then(
            pl.concat_str(named, pl.lit(" "), path)
        )
        operations = spans.select("index", operation.otherwise(named).alias("operation"))
        return (
            pl.concat([attributed, messages])
            .join(operations, on="index", how="left")
            .select("index", "trace_id", "operation", "direction", "payload_bytes", "compressed")
        )

    def _messages(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """Per span and direction, the largest message of its RPC message events (spans whose attributes give
        no size). Columns as :meth:`payloads` less operation."""
        config = self.config
        frame = ctx.analysis.tree.spans
        empty = pl.DataFrame(
            schema={
                "index": pl.Int64,
                "trace_id": pl.String,
                "direction": pl.String,
                "payload_bytes": pl.Int64,
                "compressed": pl.Boolean,
            }
        )
        if not {"event_names", "event_attributes"} <= set(frame.columns) or not config.message_event_names:
            return empty
        events = (
            frame.select(
                pl.int_range(pl.len(), dtype=pl.Int64).alias("index"),
                "trace_id",
                "kind",
                "event_names",
                "event_attributes",
            )
            .filter(pl.col("event_names").list.len() > 0)
            .explode("event_names", "event_attributes")
            .filter(pl.col("event_names").is_in(config.message_event_names))
            .rename({"event_attributes": "attributes"})
        )
        if events.height == 0:
            return empty
        uncompressed = first_attribute(config.message_uncompressed_keys).cast(pl.Int64, strict=False)
        compressed_size = first_attribute(config.message_compressed_keys).cast(pl.Int64, strict=False)
        message_type = first_attribute(config.message_type_keys).str.to_uppercase()
        sent_is_request = pl.col("kind") == "Client"
        direction = (
            pl.when(message_type == SENT)
            .then(pl.when(sent_is_request).then(pl.lit("request")).otherwise(pl.lit("response")))
            .when(message_type == RECEIVED)
            .then(pl.when(sent_is_request).then(pl.lit("response")).otherwise(pl.lit("request")))
        )
        return (
            events.select(
                "index",
                "trace_id",
                direction.alias("direction"),
                pl.coalesce(uncompressed, compressed_size).alias("payload_bytes"),
                (compressed_size < uncompressed).fill_null(False).alias("compressed"),
            )
            .drop_nulls(["direction", "payload_bytes"])
            .sort("payload_bytes", descending=True)
            .unique(["index", "direction"], keep="first", maintain_order=True)
        )
