"""Throughput of the per-trace analysis (``analysis/``) on synthetic agent traces.

Generates ``--traces`` traces (default 100,000, about 2M spans) of an agent stack served by vLLM, in the
shape ``ClickHouseTraceReader.trace`` returns (attributes as ``Map(String, String)``):

    gateway  POST /v1/agent (Server) -> POST (Client, sometimes with tcp.connect + tls.connect under it)
    agent    POST /v1/invoke (Server) -> invoke_agent (gen_ai) -> plan; retrieval (embeddings + qdrant);
             tools in parallel (execute_tool, each with an HTTP or database call); one or two
             chat (Client) -> vllm llm_request (gen_ai.latency.*); parse_output

in three mixes (simple chat, RAG with tools, tool-heavy with a second LLM call), with log-normal timings.
Then times the full analysis of all traces at once: tree (parents, repairs, depth, clamping), self time,
critical path, stage rules, the vLLM split, both decompositions, and the per-span and per-request tables.

Run: ``python benchmarks/analysis_throughput.py [--traces 100000] [--seed 7]``. The last line is
``analysis_spans_per_s: N`` (spans analysed per second, generation excluded).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

# Run as a script, Python puts benchmarks/ first on sys.path; the repository root takes its place, so the packages
# are this checkout's.
REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

from analysis import build_tree, span_attributions, stage_breakdown_wide  # noqa: E402
from analysis.trace_analysis import TraceAnalysis  # noqa: E402
from units import NS_PER_MS  # noqa: E402

Duration = Callable[[np.random.Generator, int], np.ndarray]
Attributes = Callable[["Timing", np.random.Generator], dict[str, pl.Series]]


def lognormal_ms(median_ms: float, sigma: float = 0.5) -> Duration:
    """Durations in ns, log-normal around ``median_ms``."""
    return lambda rng, n: (rng.lognormal(np.log(median_ms), sigma, n) * NS_PER_MS).astype(np.int64)


@dataclass
class Node:
    """One span of a trace template; ``parallel`` children start together, others one after another."""

    name: str
    service: str
    kind: str
    own: Duration = field(default_factory=lambda: lognormal_ms(0.2))
    children: list[Node] = field(default_factory=list)
    parallel: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    dynamic: Attributes | None = None
    leaf: Duration | None = None
    slow_queue: float | None = None
    """Set on vLLM's ``llm_request``: the share of requests that wait long in the scheduler's queue."""


@dataclass
class Timing:
    """Start and end (ns) of one template node in every generated trace."""

    start: np.ndarray
    end: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)


def _seconds(ns: np.ndarray) -> pl.Series:
    return pl.Series(ns / 1e9).cast(pl.String)


def vllm_request(rng: np.random.Generator, n: int, slow_queue: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Phases of ``llm_request`` spans (ns): arrival->queued, queue, prefill, decode, output processing."""
    phases = {
        "pre": lognormal_ms(0.3)(rng, n),
        "queue": np.where(rng.random(n) < slow_queue, lognormal_ms(400, 0.6)(rng, n), lognormal_ms(3)(rng, n)),
        "prefill": lognormal_ms(40, 0.6)(rng, n),
        "tokens": rng.integers(2, 400, n),
        "post": lognormal_ms(0.2)(rng, n),
    }
    phases["decode"] = phases["tokens"] * lognormal_ms(12, 0.2)(rng, n)
    return sum(phases[k] for k in ("pre", "queue", "prefill", "decode", "post")), phases


def llm_node(slow_queue: float) -> Node:
    """``chat`` client span around vLLM's ``llm_request``."""

    def engine_attributes(timing: Timing, rng: np.random.Generator) -> dict[str, pl.Series]:
        p = timing.extra
        return {
            "gen_ai.latency.time_in_queue": _seconds(p["queue"]),
            "gen_ai.latency.time_in_model_prefill": _seconds(p["prefill"]),
            "gen_ai.latency.time_in_model_decode": _seconds(p["decode"]),
            "gen_ai.latency.time_to_first_token": _seconds(p["pre"] + p["queue"] + p["prefill"]),
            "gen_ai.latency.e2e": _seconds(timing.end - timing.start),
            "gen_ai.usage.prompt_tokens": pl.Series(rng.integers(50, 4000, p["tokens"].size)).cast(pl.String),
            "gen_ai.usage.completion_tokens": pl.Series(p["tokens"]).cast(pl.String),
        }

    engine = Node("llm_request", "vllm", "Server", dynamic=engine_attributes, slow_queue=slow_queue)
    return Node(
        "chat meta-llama/Llama-3.1-8B-Instruct",
        "agent",
        "Client",
        children=[engine],
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "meta-llama/Llama-3.1-8B-Instruct",
            "server.address": "vllm",
        },
    )


def tool(name: str, backend: Node) -> Node:
    return Node(
        f"execute_tool {name}",
        "agent",
        "Internal",
        children=[backend],
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
    )


def http_call(name: str, median_ms: float) -> Node:
    return Node(name, "agent", "Client", leaf=lognormal_ms(median_ms), attributes={"http.request.method": "GET"})


def db_call(system: str, statement: str, median_ms: float) -> Node:
    return Node(statement, "agent", "Client", leaf=lognormal_ms(median_ms), attributes={"db.system": system})


def agent_trace(work: list[Node], *, connect: bool) -> Node:
    """gateway -> agent -> invoke_agent -> ``work`` in order, then output parsing."""
    hop = [
        Node("tcp.connect", "gateway", "Internal", leaf=lognormal_ms(1)),
        Node("tls.connect", "gateway", "Internal", leaf=lognormal_ms(4)),
    ]
    invoke = Node(
        "invoke_agent support-agent",
        "agent",
        "Internal",
        children=[
            Node("plan support-agent", "agent", "Internal", leaf=lognormal_ms(2)),
            *work,
            Node("parse_output", "agent", "Internal", leaf=lognormal_ms(1)),
        ],
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-agent", "tenant_id": "acme"},
    )
    server = Node("POST /v1/invoke", "agent", "Server", children=[invoke], attributes={"http.request.method": "POST"})
    client = Node(
        "POST",
        "gateway",
        "Client",
        children=[*(hop if connect else []), server],
        attributes={"http.request.method": "POST"},
    )
    return Node("POST /v1/agent", "gateway", "Server", children=[client], attributes={"http.request.method": "POST"})


def templates() -> list[tuple[float, Node]]:
    """(share of traces, template); about 20 spans per trace on average."""
    retrieval = Node(
        "retrieve documents",
        "agent",
        "Internal",
        children=[
            Node(
                "embeddings bge-small",
                "agent",
                "Client",
                leaf=lognormal_ms(8),
                attributes={"gen_ai.operation.name": "embeddings"},
            ),
            db_call("qdrant", "qdrant search", 15),
        ],
    )
    tools = Node(
        "run tools",
        "agent",
        "Internal",
        parallel=True,
        children=[
            tool("weather", http_call("GET /weather", 60)),
            tool("crm", db_call("postgresql", "SELECT", 20)),
            tool("search", http_call("GET /search", 120)),
        ],
    )
    many_tools = Node(
        "run tools",
        "agent",
        "Internal",
        parallel=True,
        children=[tool(f"t{i}", db_call("postgresql", "SELECT", 10 + 10 * i)) for i in range(5)],
    )
    return [
        (0.15, agent_trace([llm_node(0.05)], connect=False)),
        (0.5, agent_trace([retrieval, tools, llm_node(0.1)], connect=True)),
        (0.35, agent_trace([retrieval, many_tools, llm_node(0.1), llm_node(0.1)], connect=True)),
    ]


def _flatten(node: Node, parent: int, out: list[tuple[Node, int]]) -> None:
    out.append((node, parent))
    me = len(out) - 1
    for child in node.children:
        _flatten(child, me, out)


def _layout(node: Node, start: np.ndarray, rng: np.random.Generator, timings: dict[int, Timing]) -> np.ndarray:
    n = start.size
    begin = start + lognormal_ms(0.05)(rng, n)
    cursor = begin + node.own(rng, n)
    if node.slow_queue is not None:
        total, phases = vllm_request(rng, n, node.slow_queue)
        cursor = begin + total
        timings[id(node)] = Timing(begin, cursor, phases)
        return cursor
    if node.leaf is not None:
        cursor = cursor + node.leaf(rng, n)
    if node.parallel:
        cursor = np.max([_layout(child, cursor, rng, timings) for child in node.children], axis=0)
    else:
        for child in node.children:
            cursor = _layout(child, cursor, rng, timings)
    end = cursor + node.own(rng, n)
    timings[id(node)] = Timing(begin, end)
    return end


def _hex_ids(numbers: np.ndarray) -> pl.Series:
    # Zero-padded decimal digits are valid lowercase hex IDs.
    return pl.Series(numbers).cast(pl.String).str.zfill(16)


def _attribute_map(values: dict[str, pl.Series], n: int) -> pl.Series:
    """The attributes of ``n`` spans as the reader returns them: ``Map(String, String)``."""
    entry = pl.Struct({"key": pl.String, "value": pl.String})
    if not values:
        return pl.Series([[]] * n, dtype=pl.List(entry)).cast(pl.Map(pl.String, pl.String))
    columns = pl.DataFrame({f"v{i}": series for i, series in enumerate(values.values())})
    entries = [pl.struct(pl.lit(key).alias("key"), pl.col(f"v{i}").alias("value")) for i, key in enumerate(values)]
    return columns.select(pl.concat_list(entries).alias("attributes")).to_series().cast(pl.Map(pl.String, pl.String))


def generate(traces: int, seed: int) -> pl.DataFrame:
    """``traces`` synthetic agent traces as a span frame (contract of ``analysis.spans``)."""
    rng = np.random.default_rng(seed)
    shares, shapes = zip(*templates(), strict=True)
    counts = rng.multinomial(traces, shares).tolist()
    frames, first_trace, first_span = [], 0, 0
    for template, n in zip(shapes, counts, strict=True):
        nodes: list[tuple[Node, int]] = []
        _flatten(template, -1, nodes)
        timings: dict[int, Timing] = {}
        _layout(template, 1_760_000_000_000_000_000 + rng.integers(0, 3_600 * 10**9, n), rng, timings)
        trace_ids = pl.Series(np.arange(first_trace, first_trace + n)).cast(pl.String).str.zfill(32)
        m = len(nodes)
        for position, (node, parent) in enumerate(nodes):
            timing = timings[id(node)]
            span_base = first_span + np.arange(n) * m
            values = {key: pl.repeat(value, n, eager=True) for key, value in node.attributes.items()}
            if node.dynamic is not None:
                values |= node.dynamic(timing, rng)
            frames.append(
                pl.DataFrame(
                    {
                        "trace_id": trace_ids,
                        "span_id": _hex_ids(span_base + position),
                        "parent_span_id": _hex_ids(span_base + parent) if parent >= 0 else pl.repeat("", n, eager=True),
                        "name": pl.repeat(node.name, n, eager=True),
                        "service_name": pl.repeat(node.service, n, eager=True),
                        "kind": pl.repeat(node.kind, n, eager=True),
                        "start_time_unix_nano": timing.start,
                        "end_time_unix_nano": timing.end,
                        "attributes": _attribute_map(values, n),
                    }
                )
            )
        first_trace += n
        first_span += n * m
    return pl.concat(frames).sort("trace_id", "start_time_unix_nano")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000, help="traces to generate (default 100000)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    started = time.perf_counter()
    spans = generate(args.traces, args.seed)
    print(f"generated {args.traces} traces, {spans.height} spans in {time.perf_counter() - started:.1f} s")

    steps: list[tuple[str, Callable[[], object]]] = []
    analysis: TraceAnalysis | None = None

    def tree() -> None:
        nonlocal analysis
        analysis = TraceAnalysis(build_tree(spans))

    steps = [
        ("tree", tree),
        ("self time", lambda: analysis.self_time_ns),
        ("critical path", lambda: analysis.sections),
        ("stages", lambda: analysis.pieces),
        ("wall clock", lambda: analysis.wall_clock),
        ("per-span table", lambda: span_attributions(analysis)),
        ("per-request table", lambda: stage_breakdown_wide(analysis)),
    ]
    total = 0.0
    for name, step in steps:
        begin = time.perf_counter()
        step()
        elapsed = time.perf_counter() - begin
        total += elapsed
        print(f"  {name:<18} {elapsed:6.2f} s")
    print(f"analysed {spans.height} spans in {total:.2f} s")
    print(f"analysis_spans_per_s: {spans.height / total:.0f}")


if __name__ == "__main__":
    main()
