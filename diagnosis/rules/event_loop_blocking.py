"""``event_loop_blocking``: a synchronous I/O call inside an async service freezes its event loop.

In an async service, requests interleave on one event loop: while one awaits I/O, the others' spans start and
end. A call made with a *blocking* client instead holds the loop for its whole duration, so no other request
of that process records anything until it returns: their next steps start late (gaps between a parent's
start and its children's starts) and their sibling spans line up behind the call instead of overlapping it.

Per process (service and ``service.instance.id``), for every outgoing I/O span (``io_kinds``) of at least
``min_call_ms``: the call is *eligible* when, during it, work for another request of the process was pending:
a response (a span of the process has a child in another process that ended) or a request (a span of the process
has a parent in another process that started) that arrived inside the call, or arrived before it and was still
unhandled when it began (that trace's next event in the process came after the call's start: the start-gap
signature). The loop then had work to do.
The call is *frozen* when, nevertheless, no span of any other trace of the process started or ended strictly
inside it (``slack_ms`` from its edges): that work waited for the call to return. A process whose other
requests all wait on slow I/O has nothing to do during a call; such calls are not eligible, so an idle loop is
not mistaken for a blocked one. Calls are grouped by operation (caller service, span name and target: URL path
or peer) within their process; an operation whose eligible calls are nearly all frozen is called synchronously. The
stall is the time the pending work waited for the call to end; its share of end-to-end latency sets the severity
(under ``stall_share_warning`` the finding is ``info``: a blocking client that costs next to nothing yet).

Freezing is judged against the same process's baseline: its operations that do not look blocking freeze only by
chance (a thread starved of CPU, the process busy elsewhere). The exact binomial test (:mod:`diagnosis.evidence`)
asks whether the operation's frozen calls are more than that chance rate explains, at ``min_eligible_calls``
eligible calls, with a frozen share at least ``chance_ratio_min`` times the chance rate; the level is divided among
the operations judged. On a host whose CPUs are contended (``cpu_contention``) a whole process can stall for tens
of milliseconds, so an operation needs ``min_eligible_calls_contended`` eligible calls there. An operation that
crosses the share but not the test is reported as ``info``: it may block, the window cannot tell.

CPU-bound spans also hold the loop; they are named by their own causes (``orchestration_cpu_hotspot``,
``tokenizer_cold_start``, ``retrieval_topk_blowup``), so only I/O calls count here.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.evidence import above_chance, joint_confidence
from diagnosis.findings import EXAMPLE_TRACES, Finding, Severity, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, in_flight, top_traces
from units import NS_PER_MS

URL_KEYS = ("url.full", "http.url")
PROCESS = ("service_name", "instance")
"""A process: its service and ``service.instance.id``. Operations are judged per process, as their calls are: two
instances of one service (a rolling deploy, one version with a blocking client) have two event loops."""
TARGET_PATTERN = r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*)?([^?#]*)"
"""A URL's path (scheme and authority dropped, query and fragment too)."""


class EventLoopBlockingConfig(RuleConfig):
    io_kinds: list[str] = Field(min_length=1, description="Span kinds of outgoing I/O calls.")
    min_call_ms: float = Field(
        gt=0,
        description="Shortest call judged, ms: under load one loop iteration takes a few ms, so a shorter call "
        "may simply see no other span by chance.",
    )
    slack_ms: float = Field(
        ge=0,
        description="Events within this many ms of a call's start or end are not counted as inside it: spans recorded "
        "around the call itself, and clock granularity.",
    )
    frozen_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of an operation's eligible calls that froze the process at which the call is "
        "synchronous. Async calls let others run and freeze only by chance, so 'nearly all' (0.8) is the line.",
    )
    min_eligible_calls: int = Field(
        ge=1,
        description="Eligible calls of one operation needed to judge it. Count. Healthy async calls freeze by "
        "chance rarely (2 of about 250 eligible calls over the instrumented stack's clean and faulty runs), so two "
        "frozen out of two is already unlikely to be chance.",
    )
    chance_ratio_min: float = Field(
        gt=1,
        description="An operation's frozen share over its process's chance rate (the share of the eligible calls of "
        "its operations that do not look blocking that froze) from which freezing matters (ratio). Async calls "
        "freeze in well under a tenth of cases (1 in 25 to 1 in 10 on the instrumented stack, quiet to beside a "
        "CPU-burning neighbour); a blocking client freezes nearly all (0.8), so 4x separates them.",
    )
    min_eligible_calls_contended: int = Field(
        ge=1,
        description="Eligible calls of one operation needed on a contended host (cpu_contention), where a whole "
        "process may wait tens of ms for a CPU and two frozen calls out of two happen by chance. Count.",
    )
    stall_share_warning: float = Field(
        ge=0,
        le=1,
        description="Stall imposed on other requests as a share (0..1) of end-to-end latency below which a blocking "
        "operation is info: its frozen calls cost the window's requests next to nothing (on a live run, 4 of 5 short "
        "tool calls froze while every other request waited at a saturated engine: 70 ms of stall in a minute).",
    )
    stall_share_critical: float = Field(
        gt=0,
        le=1,
        description="Stall imposed on other requests as a share (0..1) of end-to-end latency that makes it critical.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> EventLoopBlockingConfig:
        if self.stall_share_critical < self.stall_share_warning:
            raise ValueError("stall_share_critical must be >= stall_share_warning")
        return self


class EventLoopBlocking(Rule[EventLoopBlockingConfig]):
    """See the module docstring."""

    cause = "event_loop_blocking"
    config_model = EventLoopBlockingConfig
    latency_share = "stall_share"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        spans = ctx.spans
        calls = spans.filter(
            pl.col("kind").is_in(config.io_kinds) & (pl.col("duration_ns") >= config.min_call_ms * NS_PER_MS)
        )
        if calls.height == 0:
            return None
        judged = self._judge(spans, calls, ctx.parent)
        contention = ctx.contention
        needed = config.min_eligible_calls_contended if contention.detected else config.min_eligible_calls
        # The chance baseline: the process's operations that do not look blocking themselves.
        others_eligible = pl.when(~pl.col("candidate")).then(pl.col("eligible")).otherwise(0).sum()
        others_frozen = pl.when(~pl.col("candidate")).then(pl.col("frozen_calls")).otherwise(0).sum()
        operations = (
            judged.filter(pl.col("pending") > 0)
            .group_by(*PROCESS, "operation")
            .agg(
                pl.len().alias("eligible"),
                pl.col("frozen").sum().alias("frozen_calls"),
                pl.col("stall_ns").filter("frozen").sum(),
            )
            .with_columns((pl.col("frozen_calls") / pl.col("eligible")).alias("frozen_share"))
            .with_columns(
                (
                    (pl.col("eligible") >= config.min_eligible_calls)
                    & (pl.col("frozen_share") >= config.frozen_share_warning)
                ).alias("candidate")
            )
            .with_columns(
                others_frozen.over(PROCESS).alias("chance_frozen"), others_eligible.over(PROCESS).alias("chance_of")
            )
            .filter("candidate")
        )
        tests = [
            above_chance(
                f"frozen calls of '{row['operation']}' in {row['service_name']} > its process's chance rate",
                row["frozen_calls"],
                row["eligible"],
                chance=(row["chance_frozen"], row["chance_of"]),
                min_count=needed,
                min_effect_ratio=config.chance_ratio_min,
                tries=operations.height,
            )
            for row in operations.iter_rows(named=True)
        ]
        operations = operations.with_columns(
            pl.Series("clear", [test.significant for test in tests], dtype=pl.Boolean),
            pl.Series("test", range(len(tests)), dtype=pl.Int64),
            (pl.col("chance_frozen") / pl.col("chance_of")).alias("chance_share"),
        ).sort(
            ["clear", "stall_ns", "frozen_share", "operation", "instance"],
            descending=[True, True, True, False, False],
        )
        if operations.height == 0:
            return None
        top = operations.row(0, named=True)
        test = tests[top["test"]]
        stalls = judged.filter(
            pl.col("frozen"), pl.col("pending") > 0, **{key: top[key] for key in (*PROCESS, "operation")}
        )
        stall_share = ctx.critical_share(float(top["stall_ns"]))
        severity: Severity = "critical" if stall_share >= config.stall_share_critical else "warning"
        verb = "blocks"
        if not top["clear"]:
            # Freezing this often is within what the process shows by itself here: worth a look, not a verdict.
            severity, verb = "info", "may block"
        elif stall_share < config.stall_share_warning:
            severity = "info"
        return Finding(
            cause=self.cause,
            title=f"'{top['operation']}' in {top['service_name']} {verb} the event loop: no other request of the "
            f"process progressed during {top['frozen_calls']} of {top['eligible']} calls",
            severity=severity,
            confidence=contention.discount(joint_confidence([test])),
            tests=[test],
            evidence={
                "service_name": top["service_name"],
                "service_instance_name": top["instance"],
                "operation_name": top["operation"],
                "eligible_call_count": top["eligible"],
                "frozen_call_count": top["frozen_calls"],
                "frozen_share": ratio(top["frozen_share"]),
                "call_ms_p50": ms(stalls["duration_ns"].median()),
                "held_arrivals_count_p50": stalls["pending"].median(),
                "stall_ms_total": ms(float(top["stall_ns"])),
                "stall_share": ratio(stall_share),
                "chance_frozen_share": ratio(top["chance_share"]),
                "cpu_contention_level_ratio": ratio(contention.level),
                "other_blocking_operation_names": operations["operation"].to_list()[1:5],
                "example_trace_ids": top_traces(stalls, "duration_ns", EXAMPLE_TRACES),
            },
            remedy="Make the call asynchronous: use the async client (httpx.AsyncClient, aiohttp, an async DB "
            "driver) or move it off the loop (asyncio.to_thread / run_in_executor). Look for requests/urllib, "
            "sync SDK clients, time.sleep and file I/O inside async handlers.",
        )

    def _judge(self, spans: pl.DataFrame, calls: pl.DataFrame, parent: np.ndarray) -> pl.DataFrame:
        """Per call: operation, work of other traces that arrived during it (pending) and how long it waited for
        the call's end (stall_ns), and whether it was frozen."""
        slack = int(self.config.slack_ms * NS_PER_MS)
        target = pl.coalesce(
            first_attribute(URL_KEYS).str.extract(TARGET_PATTERN, 1),
            first_attribute(["url.path", "http.target", "http.route"]),
            pl.concat_str(first_attribute(["server.address"]), pl.lit(":"), first_attribute(["server.port"])),
        )
        calls = calls.with_columns(
            pl.concat_str(pl.col("name"), pl.lit(" "), target.fill_null("")).str.strip_chars().alias("operation"),
            (pl.col("start_ns") + slack).alias("lo"),
            (pl.col("end_ns") - slack).alias("hi"),
        )
        arrivals = _remote_arrivals(spans, parent)
        judged = []
        for key, group in calls.group_by(*PROCESS):
            process = dict(zip(PROCESS, key, strict=True))
            judged.append(_judge_process(spans.filter(**process), arrivals.filter(**process).drop(*PROCESS), group))
        return pl.concat(judged)


def _remote_arrivals(spans: pl.DataFrame, parent: np.ndarray) -> pl.DataFrame:
    """Work that reached each process from another: responses (a span's child in another process ended: the
    caller has a reply to handle) and requests (a span's parent in another process started: the callee has a
    request to accept). Columns: service_name, instance, trace_id of the receiving side; arrival_ns."""
    child = np.flatnonzero(parent >= 0)
    up = parent[child]
    service = spans["service_name"].to_numpy()
    instance = spans["instance"].to_numpy()
    remote = (service[child] != service[up]) | (instance[child] != instance[up])
    child, up = child[remote], up[remote]
    trace = spans["trace_id"].to_numpy()
    receiver = np.concatenate([up, child])
    arrival = np.concatenate([spans["end_ns"].to_numpy()[child], spans["start_ns"].to_numpy()[up]])
    return pl.DataFrame(
        {
            "service_name": service[receiver],
            "instance": instance[receiver],
            "trace_id": trace[receiver],
            "arrival_ns": arrival,
        },
        schema={"service_name": pl.String, "instance": pl.String, "trace_id": pl.String, "arrival_ns": pl.Int64},
    )


def _judge_process(process: pl.DataFrame, arrivals: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """:meth:`EventLoopBlocking._judge` for the calls of one process. Work is pending during a call when it
    arrived inside it, or arrived before it and was still unhandled when it began (its trace's next event in
    the process came after the call's start): the loop had that work to do while the call ran."""
    events = process.select(pl.concat_list("start_ns", "end_ns").alias("at"), "trace_id").explode("at")
    inside = _others_inside(calls, events).drop("waited_ns")
    pending = _others_inside(calls, arrivals.rename({"arrival_ns": "at"}))
    waiting = _others_waiting_at_start(calls, _handled(arrivals, events))
    return (
        calls.select("index", "trace_id", "service_name", "instance", "operation", "duration_ns", "lo", "hi")
        .join(inside.rename({"count": "inside"}), on="index", how="left")
        .join(pending.rename({"count": "pending", "waited_ns": "stall_ns"}), on="index", how="left")
        .join(waiting, on="index", how="left")
        .with_columns(pl.col("inside", "pending", "stall_ns", "waiting").fill_null(0))
        .select(
            "index",
            "trace_id",
            "service_name",
            "instance",
            "operation",
            "duration_ns",
            (pl.col("pending") + pl.col("waiting")).alias("pending"),
            # Work waiting when the call began waited its whole length (less the slack).
            (pl.col("stall_ns") + pl.col("waiting") * (pl.col("hi") - pl.col("lo"))).alias("stall_ns"),
            (pl.col("inside") == 0).alias("frozen"),
        )
    )


def _handled(arrivals: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Arrivals (trace_id, arrival_ns) with handled_ns: the first event (``at``) of their trace in the process at
    or after the arrival; arrivals never followed by one are left out."""
    return (
        arrivals.sort("arrival_ns")
        .join_asof(
            events.rename({"at": "handled_ns"}).sort("handled_ns"),
            left_on="arrival_ns",
            right_on="handled_ns",
            by="trace_id",
            strategy="forward",
            check_sortedness=False,
        )
        .drop_nulls("handled_ns")
    )


def _others_waiting_at_start(calls: pl.DataFrame, handled: pl.DataFrame) -> pl.DataFrame:
    """Per call (index): ``waiting``, the arrivals of *other* traces that came at or before ``lo`` (the call's
    start plus the slack) and were handled after it. Counted over every trace by binary search, the call's own
    trace subtracted through a join."""
    at = calls["lo"].to_numpy()
    every = in_flight(handled["arrival_ns"].to_numpy(), handled["handled_ns"].to_numpy(), at)
    own = (
        calls.select("index", "trace_id", "lo")
        .join(handled, on="trace_id")
        .filter((pl.col("arrival_ns") <= pl.col("lo")) & (pl.col("handled_ns") > pl.col("lo")))
        .group_by("index")
        .agg(pl.len().cast(pl.Int64).alias("own"))
    )
    return (
        pl.DataFrame({"index": calls["index"], "every": every})
        .join(own, on="index", how="left")
        .select("index", (pl.col("every") - pl.col("own").fill_null(0)).alias("waiting"))
    )


def _others_inside(calls: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """Per call (index): ``count``, the ``points`` (``at``, ns) of *other* traces strictly inside ``(lo, hi)``,
    and ``waited_ns``, how long they waited for ``hi`` (the call's end less the slack), summed.

    Points are sorted once and each call's range is found by binary search (prefix sums give the waits); the
    call's own trace is then subtracted through a join that pairs a call only with its own trace's points.
    Times are taken relative to the earliest one so the prefix sums stay exact in Int64.
    """
    origin = min(int(points["at"].min() or 0), int(calls["lo"].min() or 0))
    at = np.sort(points["at"].to_numpy() - origin)
    prefix = np.concatenate([[0], np.cumsum(at)])
    lo, hi = calls["lo"].to_numpy() - origin, calls["hi"].to_numpy() - origin
    first = np.searchsorted(at, lo, "right")
    last = np.maximum(np.searchsorted(at, hi, "left"), first)
    own = (
        calls.select("index", "trace_id", "lo", "hi")
        .join(points, on="trace_id")
        .filter((pl.col("at") > pl.col("lo")) & (pl.col("at") < pl.col("hi")))
        .group_by("index")
        .agg(pl.len().cast(pl.Int64).alias("own"), (pl.col("at") - origin).sum().alias("own_at"))
    )
    return (
        pl.DataFrame({"index": calls["index"], "all": last - first, "all_at": prefix[last] - prefix[first], "hi": hi})
        .join(own, on="index", how="left")
        .with_columns(pl.col("own", "own_at").fill_null(0))
        .select(
            "index",
            (pl.col("all") - pl.col("own")).alias("count"),
            ((pl.col("all") - pl.col("own")) * pl.col("hi") - (pl.col("all_at") - pl.col("own_at"))).alias("waited_ns"),
        )
    )
