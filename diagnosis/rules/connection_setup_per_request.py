"""``connection_setup_per_request``: outgoing calls open a new connection (TCP, often TLS) every time.

An outgoing call is a CLIENT span, or a span with a GenAI ``gen_ai.operation.name`` of a model call (an LLM
client span may be INTERNAL); nested calls of the same service count once, as their outermost span. A call
*opened a connection* when a connection set-up span (``connection_span_names``: ``connect``,
``tls_handshake``, ...) lies below it. Calls are grouped by caller service and peer (``server.address`` and
``server.port``, else the URL's host, else the span name); the group where the most calls connect is reported.

A pool opens at most one connection per concurrent caller and reuses it, so over a window with several calls
per connection most calls open none; per-request clients open one on every call. But when the calls overlap, a pool
opens one per call too: 91 model calls of the mooncake replay, 20 s each under load, all nearly at once, opened 85
connections through one shared keep-alive client. So the share is taken over the calls an ideal keep-alive pool
would have served on a connection it held (:func:`pool_connections`: one connection per call in flight, each kept
``pool_keepalive_s`` after its call): of those, ``connection_share_warning`` or more must open one anyway.
"""

from __future__ import annotations

import heapq

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, name_matches, nearest_marked, top_traces

URL_KEYS = ("url.full", "http.url")


class ConnectionSetupConfig(RuleConfig):
    connection_span_names: list[str] = Field(
        min_length=1, description="Globs naming connection set-up spans (TCP connect, TLS handshake, DNS)."
    )
    tls_span_names: list[str] = Field(description="Globs, among those, naming TLS handshakes.")
    call_operations: list[str] = Field(
        description="gen_ai.operation.name values that make a span an outgoing model call whatever its kind."
    )
    connection_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of a peer's calls that open a connection at which connections are not reused: "
        "a pool's share falls with every call a connection serves, so 'most calls' (0.8) means per request.",
    )
    setup_share_critical: float = Field(
        gt=0,
        le=1,
        description="Connection set-up time as a share (0..1) of end-to-end latency that makes it critical.",
    )
    min_calls: int = Field(
        ge=2,
        description="Calls to one peer that an ideal pool would have served on a held connection, needed to judge "
        "(fewer, and every call may be a pool's first). Count.",
    )
    pool_keepalive_s: float = Field(
        gt=0,
        description="How long the ideal pool keeps an idle connection: httpx's keepalive_expiry and uvicorn's "
        "timeout_keep_alive default to 5 s, so a pool reconnects after longer gaps. Seconds.",
    )
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _tls_within(self) -> ConnectionSetupConfig:
        if not set(self.tls_span_names) <= set(self.connection_span_names):
            raise ValueError("tls_span_names must be a subset of connection_span_names")
        return self


class ConnectionSetupPerRequest(Rule[ConnectionSetupConfig]):
    """See the module docstring."""

    cause = "connection_setup_per_request"
    config_model = ConnectionSetupConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        spans = ctx.spans
        flags = spans.select(
            name_matches(config.connection_span_names).alias("connection"),
            name_matches(config.tls_span_names).alias("tls"),
            (
                (pl.col("kind") == "Client")
                | first_attribute(["gen_ai.operation.name"]).is_in(config.call_operations).fill_null(False)
            ).alias("call"),
        )
        is_connection = flags["connection"].to_numpy()
        if not is_connection.any():
            return None
        is_call = flags["call"].to_numpy() & ~is_connection
        parent = ctx.parent
        # Outermost calls only: a call below another call of the same service is that call's transport.
        above = nearest_marked(parent, is_call)[np.maximum(parent, 0)]
        above[parent < 0] = -1
        service = spans["service_name"].to_numpy()
        nested = is_call & (above >= 0) & (service == service[np.maximum(above, 0)])
        outer = is_call & ~nested
        owner = nearest_marked(parent, outer)
        setup = self._setup_per_call(spans, owner, is_connection, flags["tls"].to_numpy())
        calls = (
            spans.filter(pl.Series(outer))
            .select(
                "index",
                "trace_id",
                "service_name",
                pl.coalesce(
                    pl.concat_str(first_attribute(["server.address"]), pl.lit(":"), first_attribute(["server.port"])),
                    first_attribute(URL_KEYS).str.extract(r"^[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#]+)"),
                    pl.col("name"),
                ).alias("peer"),
            )
            .join(setup, on="index", how="left")
            .with_columns(pl.col("connections").fill_null(0), pl.col("tls_count").fill_null(0))
            .join(spans.select("index", "start_ns", "end_ns"), on="index")
        )
        keepalive_ns = int(config.pool_keepalive_s * 1e9)
        groups = (
            calls.group_by("service_name", "peer")
            .agg(
                pl.len().alias("calls"),
                (pl.col("connections") > 0).sum().alias("connecting"),
                (pl.col("tls_count") > 0).sum().alias("tls"),
                pl.col("setup_critical_ns").sum().alias("setup_critical_ns"),
                pl.struct("start_ns", "end_ns")
                .map_batches(
                    lambda calls: pl.Series([pool_connections(*calls.struct.unnest(), keepalive_ns)]),
                    return_dtype=pl.Int64,
                    returns_scalar=True,
                )
                .alias("pool_connections"),
            )
            .with_columns((pl.col("calls") - pl.col("pool_connections")).alias("reusable"))
            .filter(pl.col("reusable") >= config.min_calls)
            .with_columns(
                (pl.col("connecting") / pl.col("calls")).alias("share"),
                ((pl.col("connecting") - pl.col("pool_connections")).clip(0) / pl.col("reusable")).alias(
                    "beyond_pool_share"
                ),
            )
            .sort(["beyond_pool_share", "setup_critical_ns"], descending=True)
        )
        if groups.height == 0 or groups["beyond_pool_share"][0] < config.connection_share_warning:
            return None
        worst = groups.row(0, named=True)
        members = calls.filter(
            (pl.col("service_name") == worst["service_name"]) & (pl.col("peer") == worst["peer"])
        ).filter(pl.col("connections") > 0)
        setup_share = ctx.critical_share(float(members["setup_critical_ns"].sum()))
        tls_share = worst["tls"] / worst["calls"]
        severity = "critical" if setup_share >= config.setup_share_critical else "warning"
        beyond = margin(worst["beyond_pool_share"], config.connection_share_warning, 1.0)
        base = 0.6 + 0.3 * beyond + 0.1 * (tls_share > 0.5)
        handshake = "TCP + TLS" if tls_share > 0.5 else "TCP"
        return Finding(
            cause=self.cause,
            title=f"{worst['share']:.0%} of {worst['service_name']}'s calls to {worst['peer']} open a new "
            f"{handshake} connection ({ms(members['setup_ns'].median())} ms each)",
            severity=severity,
            confidence=confidence(base, samples=worst["reusable"], full=config.full_confidence_calls),
            evidence={
                "caller_service_name": worst["service_name"],
                "peer_name": worst["peer"],
                "call_count": worst["calls"],
                "connecting_call_count": worst["connecting"],
                "connection_share": ratio(worst["share"]),
                "pool_connection_count": worst["pool_connections"],
                "beyond_pool_share": ratio(worst["beyond_pool_share"]),
                "tls_share": ratio(tls_share),
                "setup_ms_p50": ms(members["setup_ns"].median()),
                "setup_ms_p95": ms(members["setup_ns"].quantile(0.95, "linear")),
                "tls_ms_p50": ms(members.filter(pl.col("tls_ns") > 0)["tls_ns"].median()),
                "setup_share": ratio(setup_share),
                "example_trace_ids": top_traces(members, "setup_ns", EXAMPLE_TRACES),
            },
            remedy="Reuse connections: create one HTTP client with a keep-alive pool per process and share it "
            "across requests (httpx.AsyncClient, aiohttp.ClientSession, requests.Session) instead of one per call; "
            "check that the server's keep-alive timeout outlasts the gaps between calls and that the pool keeps as "
            "many idle connections as calls run at once (httpx keeps 20 by default: max_keepalive_connections; "
            "an ideal pool needed pool_connection_count), and enable TLS session resumption where connections "
            "must be new.",
        )

    @staticmethod
    def _setup_per_call(
        spans: pl.DataFrame, owner: np.ndarray, is_connection: np.ndarray, is_tls: np.ndarray
    ) -> pl.DataFrame:
        """Per owning call: connection spans below it, TLS among them, their summed duration and
        critical-path time (set-up phases run one after another, so durations add)."""
        owned = is_connection & (owner >= 0)
        return (
            pl.DataFrame(
                {
                    "index": owner[owned],
                    "duration_ns": spans["duration_ns"].to_numpy()[owned],
                    "critical_ns": spans["critical_path_ns"].to_numpy()[owned],
                    "tls": is_tls[owned],
                }
            )
            .group_by("index")
            .agg(
                pl.len().alias("connections"),
                pl.col("tls").sum().alias("tls_count"),
                pl.col("duration_ns").sum().alias("setup_ns"),
                pl.col("duration_ns").filter("tls").sum().alias("tls_ns"),
                pl.col("critical_ns").sum().alias("setup_critical_ns"),
            )
        )


def pool_connections(starts: pl.Series, ends: pl.Series, keepalive_ns: int) -> int:
    """Connections an ideal keep-alive pool opens for calls starting at ``starts`` and ending at ``ends`` (ns): a
    call takes the most recently released idle connection, if released at most ``keepalive_ns`` before its start,
    else opens one; a connection is idle from its call's end. As many as the calls in flight at the busiest
    moment, plus one after each gap longer than the keep-alive (httpx's and uvicorn's default 5 s)."""
    order = np.argsort(starts.to_numpy(), kind="stable")
    begin, finish = starts.to_numpy()[order], ends.to_numpy()[order]
    in_flight: list[int] = []
    idle: list[int] = []  # negated release times: the most recent first
    opened = 0
    for start, end in zip(begin.tolist(), finish.tolist(), strict=True):
        while in_flight and in_flight[0] <= start:
            heapq.heappush(idle, -heapq.heappop(in_flight))
        if idle and -idle[0] >= start - keepalive_ns:
            heapq.heappop(idle)
        else:
            idle.clear()  # the most recent one expired, so did the rest
            opened += 1
        heapq.heappush(in_flight, end)
    return opened
