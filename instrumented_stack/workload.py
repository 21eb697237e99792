"""Workload traces from the shared data directory, as request records the stack can replay.

Sources (``<shared data>/workloads/``; :data:`WORKLOADS` names them):

- ``azure-conv``: ``azure__AzureLLMInferenceTrace_conv.csv`` and ``azure-code``:
  ``azure__AzureLLMInferenceTrace_code.csv`` (Azure LLM inference trace 2023, Splitwise, ISCA 2024),
  columns ``TIMESTAMP`` (invocation time), ``ContextTokens`` (prompt tokens), ``GeneratedTokens``;
- ``mooncake``: ``mooncake__conversation_trace.jsonl`` (Mooncake FAST'25 conversation trace), one JSON
  object per line: ``timestamp`` (arrival, **milliseconds** from the trace start), ``input_length``,
  ``output_length`` and ``hash_ids``, the remapped hashes of the prompt's 512-token blocks (equal ids are
  equal prefix blocks).

The shared data directory is found with the precedence argument > environment > default:
``shared_dir`` argument, then ``HOTSPAN_SHARED_DATA``, then ``<repo>/../shared/data``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import polars as pl

from instrumented_stack.env import ENV_SHARED_DATA

AZURE_CONV_FILE = "workloads/azure__AzureLLMInferenceTrace_conv.csv"
"""Path of the Azure conversation trace, relative to the shared data directory."""
AZURE_CODE_FILE = "workloads/azure__AzureLLMInferenceTrace_code.csv"
MOONCAKE_FILE = "workloads/mooncake__conversation_trace.jsonl"

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per Mooncake ``hash_ids`` block (the trace README)."""

WorkloadName = Literal["azure-conv", "azure-code", "mooncake"]
WORKLOADS: tuple[str, ...] = get_args(WorkloadName)

_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S%.f"


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One request of a workload trace.

    Attributes:
        index: 0-based row number in the source file.
        arrival_offset_s: arrival time in **seconds** after the first row of the file (>= 0).
        prompt_tokens: prompt length in tokens (>= 1).
        output_tokens: number of tokens to generate (>= 1).
        hash_ids: Mooncake prefix block hashes, one per :data:`MOONCAKE_BLOCK_TOKENS` tokens of the prompt
            (the last block may be partial); empty for traces without them.
    """

    index: int
    arrival_offset_s: float
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


def default_shared_data_dir() -> Path:
    """``<repo>/../shared/data``, where ``<repo>`` is the checkout holding this package."""
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir(shared_dir: Path | None = None) -> Path:
    """The shared data directory: ``shared_dir``, else ``$HOTSPAN_SHARED_DATA``, else the default.

    Raises:
        FileNotFoundError: the chosen directory does not exist; the message names it and the variable.
    """
    from_env = os.environ.get(ENV_SHARED_DATA)
    chosen = shared_dir or (Path(from_env) if from_env else default_shared_data_dir())
    if not chosen.is_dir():
        raise FileNotFoundError(f"shared data directory {chosen} does not exist (set {ENV_SHARED_DATA} to override)")
    return chosen


def load_azure_trace(
    path: Path | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
    shared_dir: Path | None = None,
) -> list[WorkloadRequest]:
    """Requests of an Azure LLM inference trace CSV, in file order.

    Args:
        path: the CSV; default the conversation trace under :func:`shared_data_dir`.
        limit: at most this many requests (``None``: all).
        offset: skip this many rows first.
        shared_dir: overrides the shared data directory (ignored when ``path`` is given).

    Returns:
        One :class:`WorkloadRequest` per row; ``arrival_offset_s`` counts from the file's first row,
        so it is unaffected by ``offset``.

    Raises:
        FileNotFoundError: the file or the shared data directory is missing.
        ValueError: a required column is missing, a row has a non-positive token count, or
            ``limit``/``offset`` is negative.
    """
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"offset and limit must be >= 0, got offset={offset}, limit={limit}")
    csv_path = path or shared_data_dir(shared_dir) / AZURE_CONV_FILE
    if not csv_path.is_file():
        raise FileNotFoundError(f"workload file {csv_path} does not exist")
    frame = pl.read_csv(csv_path)
    missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(frame.columns)
    if missing:
        raise ValueError(f"{csv_path}: missing column(s) {sorted(missing)}")
    arrival = pl.col("TIMESTAMP").str.to_datetime(_TIMESTAMP_FORMAT)
    frame = frame.select(
        ((arrival - arrival.first()).dt.total_microseconds() / 1e6).alias("arrival_offset_s"),
        pl.col("ContextTokens").cast(pl.Int64).alias("prompt_tokens"),
        pl.col("GeneratedTokens").cast(pl.Int64).alias("output_tokens"),
    ).with_row_index("index")
    frame = frame.slice(offset, limit)
    bad = frame.filter((pl.col("prompt_tokens") < 1) | (pl.col("output_tokens") < 1))
    if bad.height:
        raise ValueError(f"{csv_path}: row {bad['index'][0]} has a token count below 1")
    return [
        WorkloadRequest(index=int(i), arrival_offset_s=float(t), prompt_tokens=int(p), output_tokens=int(o))
        for i, t, p, o in frame.iter_rows()
    ]


def load_mooncake_trace(
    path: Path | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
    shared_dir: Path | None = None,
) -> list[WorkloadRequest]:
    """Requests of a Mooncake trace JSONL file, in file order (arguments as :func:`load_azure_trace`).

    ``arrival_offset_s`` is the row's ``timestamp`` (ms) over 1000, minus the first row's.

    Raises:
        FileNotFoundError: the file or the shared data directory is missing.
        ValueError: a line is not a JSON object with the four fields, a token count is below 1, there are
            fewer ``hash_ids`` than the prompt's blocks need, or ``limit``/``offset`` is negative.
    """
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"offset and limit must be >= 0, got offset={offset}, limit={limit}")
    jsonl_path = path or shared_data_dir(shared_dir) / MOONCAKE_FILE
    if not jsonl_path.is_file():
        raise FileNotFoundError(f"workload file {jsonl_path} does not exist")
    rows: list[WorkloadRequest] = []
    first_ms: float | None = None
    with jsonl_path.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            try:
                record = json.loads(line)
                timestamp_ms = float(record["timestamp"])
                prompt, output = int(record["input_length"]), int(record["output_length"])
                hash_ids = tuple(int(h) for h in record["hash_ids"])
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{jsonl_path}: line {index + 1} is not a Mooncake request: {error}") from error
            first_ms = timestamp_ms if first_ms is None else first_ms
            if index < offset:
                continue
            if limit is not None and len(rows) >= limit:
                break
            if prompt < 1 or output < 1:
                raise ValueError(f"{jsonl_path}: row {index} has a token count below 1")
            if len(hash_ids) * MOONCAKE_BLOCK_TOKENS < prompt:
                raise ValueError(f"{jsonl_path}: row {index} has too few hash_ids for {prompt} tokens")
            rows.append(WorkloadRequest(index, (timestamp_ms - first_ms) / 1e3, prompt, output, hash_ids))
    return rows


def load_workload(
    name: str, *, limit: int | None = None, offset: int = 0, shared_dir: Path | None = None
) -> list[WorkloadRequest]:
    """Requests of the workload called ``name`` (one of :data:`WORKLOADS`).

    Raises:
        ValueError: an unknown name (the message lists the known ones), or as the loaders do.
        FileNotFoundError: as the loaders do.
    """
    if name == "mooncake":
        return load_mooncake_trace(limit=limit, offset=offset, shared_dir=shared_dir)
    files = {"azure-conv": AZURE_CONV_FILE, "azure-code": AZURE_CODE_FILE}
    if name not in files:
        raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    return load_azure_trace(shared_data_dir(shared_dir) / files[name], limit=limit, offset=offset)
