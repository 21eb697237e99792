"""Every model call of a set of traces, whatever instrumentation wrote it: timing, model, tokens, first token.

A *model call* is a span an LLM-call rule matches (``split: first_token`` in the stage table: a GenAI
``chat`` span, an OpenInference ``LLM`` span, a Vercel ``doGenerate``, a Langfuse generation, an HTTP request
to a model API ...), traced below or not, or an engine span split into vLLM's phases (``llm_request``).
Calls nest: an agent framework's LLM span around the OpenAI SDK's span around vLLM's ``llm_request`` are one
request to the model seen three times. They nest as the analysis tree has them, but for a server span
:mod:`analysis.remote_spans` lifted out of the span that called it (a streamed engine span outliving an HTTP request
span that ended at the headers): it still answered that call, wherever its caller waited for it. So:

- a call is **outermost** when no other call encloses it: outermost calls are what a request *made*, and
  what :func:`analysis.decomposition.request_summary` counts;
- each token count is **counted** on the innermost call of a chain that reports *that* count, and only there
  (every span of a chain usually repeats the same usage, and a framework span above may carry a step's total),
  so per-trace sums count each generation once. Counts are taken one by one because conventions differ in what
  they report: vLLM's ``llm_request`` has prompt and completion tokens but no cached ones, which the client
  span above it reports. Spans that are no call (an agent or workflow span summing its steps' usage) are never
  counted.

Model: a call's own (:data:`analysis.genai.MODEL_KEYS`), else the nearest enclosing call's, else the first its
chain names; where no span of the chain names one, the engine's served model its resource names
(:func:`analysis.genai.engine_model`: vLLM v1's ``llm_request`` names none), found the same way. A model a
client names wins over the engine's: it is what the request asked for.

First token: a call's first token is :func:`analysis.genai.first_token_ns` of its span, or for an engine
span vLLM's ``time_to_first_token``; ``ttft_ns`` is its delay after the span's start. ``stream_ns`` is the
time after the first token (vLLM's ``time_in_model_decode`` on an engine span, ``end - first token`` on a
client span), so ``stream_ns / (output_tokens - 1)`` is the call's time per output token (vLLM's TPOT
definition, ``vllm/v1/metrics/stats.py``).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis import ancestry
from analysis.genai import TOKEN_COLUMNS, engine_model, first_token_ns, usage_columns
from analysis.spans import seconds_attribute_ns
from analysis.stages import VLLM_SPLIT
from analysis.trace_analysis import TraceAnalysis
from analysis.tree import LIFTED, SpanTree
from analysis.vllm import TIME_IN_DECODE, TIME_TO_FIRST_TOKEN

MODEL_CALL_COLUMNS = (
    "trace_id",
    "span_id",
    "index",
    "service_name",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "engine",
    "traced",
    "outermost",
    "call_index",
    "counted",
    "model",
    "provider",
    *TOKEN_COLUMNS,
    "ttft_ns",
    "stream_ns",
    "status_code",
)


def model_calls(analysis: TraceAnalysis) -> pl.DataFrame:
    """The model calls of every trace in ``analysis`` (module docstring), in span order.

    Returns:
        One row per call: trace_id, span_id, service_name, name (String); index (Int64, into
        ``analysis.tree.spans``); start_ns, end_ns (Int64 ns since the epoch), duration_ns (Int64 ns);
        engine (Boolean: an engine span split into vLLM's phases); traced (Boolean: an LLM call span with a
        SERVER span below it); outermost (Boolean, module docstring); call_index (Int64, the index of the
        outermost call this one belongs to: itself when outermost); counted (Boolean, some count is counted
        here); model (String, the call's model as the module docstring resolves it, null when no call of
        its chain names one, by a span attribute or its engine's resource); provider (String, null when not
        reported); input_tokens, output_tokens, cached_input_tokens, reasoning_tokens (Int64, the counts
        counted on this call, null where the span reports none or a call below it reports the same count: sum
        them as they are); ttft_ns, stream_ns (Int64 ns, null when the first token is unknown); status_code
        (String, ``Unset`` when the frame has none).
    """
    tree, assignment = analysis.tree, analysis.assignment
    parent, depth = _call_nesting(tree)
    engine = assignment.split == VLLM_SPLIT
    call = assignment.call | engine
    index = np.flatnonzero(call)
    enclosing = ancestry.nearest_flagged(parent, depth, call)
    above = np.where(parent >= 0, enclosing[np.maximum(parent, 0)], -1)
    frame = tree.spans[index]
    status = pl.col("status_code").fill_null("Unset") if "status_code" in frame.columns else pl.lit("Unset")
    usage = frame.select(*usage_columns(), status.alias("status_code"))
    counted_usage = [
        pl.Series(name, usage[name]).set(
            pl.Series(~_innermost(parent, depth, index, usage[name].is_not_null().to_numpy())), None
        )
        for name in TOKEN_COLUMNS
    ]
    counted = pl.DataFrame(counted_usage).select(pl.any_horizontal(pl.all().is_not_null())).to_series()
    outermost = np.flatnonzero(call & (above < 0))
    call_index = ancestry.nearest_flagged(parent, depth, np.isin(np.arange(tree.size), outermost))
    chains = call_index[index]
    model = _chain_model(parent, depth, index, chains, usage["model"])
    served = _chain_model(parent, depth, index, chains, engine_model(frame))
    model = pl.select(pl.coalesce(model, served)).to_series().alias("model")
    is_engine = pl.Series(engine[index])
    engine_first = frame.select(pl.col("start_time_unix_nano") + seconds_attribute_ns(TIME_TO_FIRST_TOKEN)).to_series()
    first = pl.select(pl.when(is_engine).then(engine_first).otherwise(first_token_ns(frame))).to_series()
    start, end = tree.start_ns[index], tree.end_ns[index]
    engine_decode = frame.select(seconds_attribute_ns(TIME_IN_DECODE)).to_series()
    ttft = first - start
    stream = pl.select(pl.when(is_engine).then(engine_decode).otherwise(pl.Series(end) - first)).to_series()
    return (
        pl.DataFrame(
            {
                "trace_id": frame["trace_id"],
                "span_id": frame["span_id"],
                "index": index.astype(np.int64),
                "service_name": frame["service_name"],
                "name": frame["name"],
                "start_ns": start,
                "end_ns": end,
                "duration_ns": end - start,
                "engine": engine[index],
                "traced": assignment.call[index] & ~assignment.llm_call[index] & ~engine[index],
                "outermost": above[index] < 0,
                "call_index": call_index[index],
                "counted": counted,
            }
        )
        .with_columns(
            model,
            usage["provider"],
            *counted_usage,
            ttft.alias("ttft_ns"),
            stream.alias("stream_ns"),
            usage["status_code"],
        )
        .select(MODEL_CALL_COLUMNS)
    )


def _call_nesting(tree: SpanTree) -> tuple[np.ndarray, np.ndarray]:
    """Parents and depths calls nest by (module docstring): the analysis tree's, a lifted server span under the
    span that called it. Where that would close a loop (an adjuster moved the caller below the server span) the
    server span keeps its analysis parent."""
    if tree.adjustment is None or tree.reported_parent is None or not (lifted := tree.adjustment == LIFTED).any():
        return tree.parent, tree.depth
    parent = np.where(lifted, tree.reported_parent, tree.parent)
    parent = np.where(lifted & ancestry.unrooted(parent), tree.parent, parent)
    return parent, ancestry.depths_and_roots(parent)[0]


def _chain_model(
    parent: np.ndarray, depth: np.ndarray, calls: np.ndarray, chains: np.ndarray, own: pl.Series
) -> pl.Series:
    """Per call (``calls``: span indices; ``chains``: their outermost call's index; ``own``: the model each
    names, null where none), its model: its own, else the nearest enclosing call's, else the chain's first."""
    named = np.zeros(parent.size, dtype=bool)
    named[calls[own.is_not_null().to_numpy()]] = True
    position = np.full(parent.size, -1, dtype=np.int64)
    position[calls] = np.arange(calls.size)
    # A call's nearest named ancestor (or itself) is a call of its own chain: the chain's root encloses both.
    nearest = ancestry.nearest_flagged(parent, depth, named)[calls]
    source = np.where(nearest >= 0, position[np.maximum(nearest, 0)], -1)
    enclosing = pl.select(pl.when(pl.Series(source >= 0)).then(own.gather(np.maximum(source, 0)))).to_series()
    return (
        pl.DataFrame({"model": enclosing, "chain": chains})
        .select(pl.coalesce("model", pl.col("model").drop_nulls().first().over("chain")))
        .to_series()
        .alias("model")
    )


def _innermost(parent: np.ndarray, depth: np.ndarray, calls: np.ndarray, reports: np.ndarray) -> np.ndarray:
    """Per call (``calls``: span indices), whether it reports a count (``reports``) and no call below it does."""
    bearer = np.zeros(parent.size, dtype=bool)
    bearer[calls[reports]] = True
    nearest = ancestry.nearest_flagged(parent, depth, bearer)
    shadowed = np.zeros(parent.size, dtype=bool)
    below = calls[reports]
    reached = np.where(parent[below] >= 0, nearest[np.maximum(parent[below], 0)], -1)
    shadowed[reached[reached >= 0]] = True
    return bearer[calls] & ~shadowed[calls]
