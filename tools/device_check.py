"""The GPU device check of issue 4: real vLLM's ``llm_request`` spans, seen through Hotspan.

One command, at the repository root of a machine with a CUDA GPU and vLLM installed::

    python -m tools.device_check --log-dir "$OUT"

1. Checks that vLLM is importable and a GPU is visible; if not, prints ``{"ok": false, "verdict": "vllm
   missing", "missing": [...]}`` within a second or two and exits 2 (nothing else is started). Then checks
   that the stack's and Hotspan's own dependencies are importable (``"hotspan dependencies missing"``, exit 3).
   Up to here only the standard library is imported, so the answer comes on any Python 3.11+.
2. Starts a served Hotspan (``hotspan.server.start_server``, embedded chDB in a temporary directory,
   OTLP/HTTP and OTLP/gRPC on free loopback ports).
3. Writes the tiny Llama-style model (random weights, the stack's tokenizer; ``engine.vllm_backend``) and
   runs ``vllm serve --load-format dummy --otlp-traces-endpoint <Hotspan>`` through the stack's launcher
   (``engine.process.EngineProcess``), waiting for ``/health``.
4. Sends ``--requests`` chat requests through the stack's LLM client (``llm_client.LlmClient``), each
   under its own root span, with a tracer provider exporting to the same Hotspan; flushes it.
5. Polls Hotspan's storage until every request's ``llm_request`` span has arrived (or ``--wait-s``), then
   stops vLLM and Hotspan.
6. Asserts, per request: exactly one ``llm_request`` span, kind SERVER, service ``vllm``, whose parent is the
   client's ``chat <model>`` span (kind CLIENT) of the same trace, carrying exactly the attribute set of
   the emulator's span (``engine.vllm_span.LLM_REQUEST_ATTRIBUTES``); and reports whether vLLM counted the
   same prompt tokens as the client's tokenizer (chat template parity; reported, not asserted).
7. Prints one line of JSON (the verdict) and exits 0 when ``ok``, else 1 (2 and 3: see step 1).

``--engine emulator`` runs the same check against the emulator's own server process (same launcher, same
assertions), which is how the tests exercise this script without a GPU. The whole run is bounded by
``--deadline-s`` (default 450 s: vLLM's start-up, the longest part, gets what is left of it), so it fits an
8-minute device slot. ``--log-dir`` keeps the engine log (``engine.log``) and the verdict (``verdict.json``).

Everything beyond the standard library is imported inside the functions that need it, Hotspan's server
(``hotspan``) and the stack (``instrumented_stack``) included, so step 1 answers on a bare Python. The check drives
both from outside, which is why it lives in ``tools/`` rather than in the server package or the stack (which
imports nothing of the server).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instrumented_stack.engine_probe import probe_vllm

if TYPE_CHECKING:
    from instrumented_stack.engine.app import EngineConfig
    from instrumented_stack.engine.process import EngineLaunch
    from instrumented_stack.engine.vllm_backend import VllmSettings
    from instrumented_stack.telemetry import OtlpProtocol

MODEL_NAME = "hotspan-tiny-llama"
ENGINE_SERVICE = "vllm"
CLIENT_SERVICE = "device-check-client"
MAX_MODEL_LEN = 2048
EXIT_OK, EXIT_FAILED, EXIT_VLLM_MISSING, EXIT_DEPENDENCIES_MISSING = 0, 1, 2, 3

HOTSPAN_MODULES: tuple[str, ...] = (
    "pydantic",
    "fastapi",
    "uvicorn",
    "httpx",
    "tokenizers",
    "numpy",
    "jsonschema",
    "prometheus_client",
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.grpc",
    "opentelemetry.instrumentation.fastapi",
    "grpc",
    "chdb",
    "clickhouse_connect",
    "polars",
    "pyarrow",
    "dash",
    "plotly",
)
"""Modules the check needs besides vLLM: the stack's and a served Hotspan's (embedded chDB included)."""


def missing_modules(names: Iterable[str] = HOTSPAN_MODULES) -> list[str]:
    """The names in ``names`` that cannot be imported here (found without importing them)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


@dataclass
class Verdict:
    """The check's outcome, printed as one JSON line (:meth:`to_json`)."""

    engine: str
    ok: bool = False
    verdict: str = "not run"
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """``{"check": ..., "engine", "ok", "verdict", **details}`` on one line."""
        return json.dumps(
            {"check": "vllm_llm_request_spans", "engine": self.engine, "ok": self.ok, "verdict": self.verdict}
            | self.details,
            sort_keys=False,
            default=str,
        )


def _attributes(value: object) -> dict[str, str]:
    """A stored attribute map as a dict: polars gives a dict, or a list of ``{"key", "value"}`` pairs."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return {str(pair["key"]): str(pair["value"]) for pair in value}
    return {}


def judge_spans(rows: list[dict[str, Any]], trace_ids: list[str], model: str) -> dict[str, Any]:
    """Check the stored spans of ``trace_ids`` (rows of ``TraceReader.traces``) as the module docstring says.

    Returns:
        ``ok`` (every trace passed), ``llm_request_spans``, ``nested_under_client_span``,
        ``attribute_set_equal`` (counts of passing traces), ``missing_attributes``/``extra_attributes``
        (sorted names, over all ``llm_request`` spans, against ``LLM_REQUEST_ATTRIBUTES``),
        ``service_names`` and ``scope_names`` of those spans, ``prompt_tokens_match`` (count of traces
        where vLLM's ``gen_ai.usage.prompt_tokens`` equals the client's ``llm.prompt_tokens``) and
        ``problems`` (at most 10 messages).
    """
    from instrumented_stack.engine.vllm_span import LLM_REQUEST_ATTRIBUTES, LLM_REQUEST_SPAN_NAME, VllmSpanAttributes
    from instrumented_stack.semconv import LLM_PROMPT_TOKENS

    by_trace: dict[str, list[dict[str, Any]]] = {trace_id: [] for trace_id in trace_ids}
    for row in rows:
        if row["trace_id"] in by_trace:
            by_trace[row["trace_id"]].append(row)
    problems: list[str] = []
    counts = {"llm_request_spans": 0, "nested_under_client_span": 0, "attribute_set_equal": 0, "prompt_tokens_match": 0}
    missing: set[str] = set()
    extra: set[str] = set()
    services: set[str] = set()
    scopes: set[str] = set()
    for trace_id, spans in by_trace.items():
        engine_spans = [s for s in spans if s["name"] == LLM_REQUEST_SPAN_NAME]
        chat_spans = {s["span_id"]: s for s in spans if s["name"] == f"chat {model}"}
        counts["llm_request_spans"] += len(engine_spans)
        if len(engine_spans) != 1:
            problems.append(f"{trace_id}: {len(engine_spans)} llm_request spans, expected 1")
            continue
        span = engine_spans[0]
        services.add(str(span["service_name"]))
        scopes.add(str(span.get("scope_name", "")))
        parent = chat_spans.get(span["parent_span_id"])
        if span["kind"] == "Server" and parent is not None and parent["kind"] == "Client":
            counts["nested_under_client_span"] += 1
        else:
            problems.append(
                f"{trace_id}: llm_request kind {span['kind']!r}, parent {span['parent_span_id']!r} is "
                f"{'not the chat span' if parent is None else 'kind ' + repr(parent['kind'])}"
            )
        attributes = _attributes(span["attributes"])
        names = set(attributes)
        missing |= LLM_REQUEST_ATTRIBUTES - names
        extra |= names - LLM_REQUEST_ATTRIBUTES
        if names == LLM_REQUEST_ATTRIBUTES:
            counts["attribute_set_equal"] += 1
        client_tokens = next(
            (_attributes(s["attributes"]).get(LLM_PROMPT_TOKENS) for s in spans if s["name"] == "tokenize"), None
        )
        if client_tokens is not None and attributes.get(VllmSpanAttributes.USAGE_PROMPT_TOKENS) == client_tokens:
            counts["prompt_tokens_match"] += 1
    if missing or extra:
        problems.append(f"attribute set differs: missing {sorted(missing)}, extra {sorted(extra)}")
    if services - {ENGINE_SERVICE}:
        problems.append(f"llm_request service.name {sorted(services)}, expected {ENGINE_SERVICE!r}")
    expected = len(trace_ids)
    ok = (
        expected > 0
        and counts["llm_request_spans"] == expected
        and counts["nested_under_client_span"] == expected
        and counts["attribute_set_equal"] == expected
        and services == {ENGINE_SERVICE}
    )
    return {
        "ok": ok,
        **counts,
        "missing_attributes": sorted(missing),
        "extra_attributes": sorted(extra),
        "service_names": sorted(services),
        "scope_names": sorted(scopes),
        "problems": problems[:10],
    }


def _engine_config() -> EngineConfig:
    from instrumented_stack.engine.app import EngineConfig
    from instrumented_stack.engine.scheduler import SchedulerConfig

    return EngineConfig(
        service_name=ENGINE_SERVICE,
        served_model_name=MODEL_NAME,
        max_model_len=MAX_MODEL_LEN,
        scheduler=SchedulerConfig(max_num_seqs=8, num_gpu_blocks=1024),
    )


def engine_launch(
    engine: str, work_dir: Path, otlp_endpoint: str, protocol: OtlpProtocol, settings: VllmSettings
) -> EngineLaunch:
    """The launch of ``engine`` (``vllm`` on the tiny model, or ``emulator``) exporting to ``otlp_endpoint``."""
    from instrumented_stack.agent import AgentConfig
    from instrumented_stack.engine.vllm_backend import vllm_launch, write_tiny_model
    from instrumented_stack.service_main import emulator_launch
    from instrumented_stack.stack import StackConfig

    config = _engine_config()
    if engine == "vllm":
        model_dir = write_tiny_model(work_dir / "model", max_model_len=config.max_model_len, model=settings.model)
        return vllm_launch(
            config, model_dir=model_dir, otlp_endpoint=otlp_endpoint, protocol=protocol, settings=settings
        )
    agent = AgentConfig(llm_base_url="http://127.0.0.1:0", model=MODEL_NAME, max_model_len=MAX_MODEL_LEN)
    return emulator_launch(StackConfig(engine=config, agent=agent), otlp_endpoint, protocol=protocol)


async def _send_requests(
    base_url: str, otlp_http: str, requests: int, prompt_tokens: int, max_tokens: int
) -> list[str]:
    """Send ``requests`` chats, each under a root span; return their trace ids. Flushes the client's spans."""
    from opentelemetry.trace import SpanKind, format_trace_id

    from instrumented_stack.llm_client import LlmClient, LlmClientConfig
    from instrumented_stack.telemetry import build_tracer_provider, otlp_span_processor
    from instrumented_stack.tokenizer import default_tokenizer, tokenizer_file

    provider = build_tracer_provider(CLIENT_SERVICE, otlp_span_processor(otlp_http), hotspan_sdk=False)
    tracer = provider.get_tracer("tools.device_check")
    tokenizer = default_tokenizer()
    config = LlmClientConfig(base_url=base_url, model=MODEL_NAME, max_model_len=MAX_MODEL_LEN, timeout_s=120.0)
    trace_ids: list[str] = []

    async def one(client: LlmClient, index: int) -> None:
        with tracer.start_as_current_span("device_check request", kind=SpanKind.SERVER) as root:
            trace_ids.append(format_trace_id(root.get_span_context().trace_id))
            prompt = tokenizer.synthesize(prompt_tokens + index, seed=index)
            await client.chat(
                [{"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0.7,
                top_p=0.95,
                ignore_eos=True,
            )

    try:
        async with LlmClient(config, tracer, tokenizer_file()) as client:
            await asyncio.gather(*(one(client, i) for i in range(requests)))
    finally:
        provider.force_flush()
        provider.shutdown()
    return trace_ids


def _wait_for_spans(reader: Any, trace_ids: list[str], wait_s: float) -> list[dict[str, Any]]:
    """Rows of ``trace_ids`` once each holds an ``llm_request`` and a chat span, or whatever is there at
    ``wait_s`` **seconds**."""
    from instrumented_stack.engine.vllm_span import LLM_REQUEST_SPAN_NAME

    deadline = time.monotonic() + wait_s
    while True:
        rows = reader.traces(trace_ids, tenant=None).to_dicts()
        engine_traces = {r["trace_id"] for r in rows if r["name"] == LLM_REQUEST_SPAN_NAME}
        client_traces = {r["trace_id"] for r in rows if r["name"] == f"chat {MODEL_NAME}"}
        if (engine_traces >= set(trace_ids) and client_traces >= set(trace_ids)) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def run_device_check(
    engine: str = "vllm",
    *,
    server: Any | None = None,
    requests: int = 4,
    prompt_tokens: int = 64,
    max_tokens: int = 16,
    protocol: OtlpProtocol = "grpc",
    deadline_s: float = 450.0,
    wait_s: float = 60.0,
    log_dir: Path | None = None,
    settings: VllmSettings | None = None,
) -> Verdict:
    """Run the check (module docstring) and return its verdict; never raises for a failed check.

    Args:
        engine: ``vllm`` or ``emulator``.
        server: a running Hotspan (``hotspan.server.RunningServer``) to use; ``None``: start one on embedded
            chDB in a temporary directory and stop it at the end.
        requests: chat requests to send (>= 1), concurrently.
        prompt_tokens: prompt length of the first request in tokens (request ``i`` has ``+ i``).
        max_tokens: tokens to generate per request (``ignore_eos``: exactly these).
        protocol: how the engine exports spans to Hotspan (vLLM's default is ``grpc``); the client uses
            OTLP/HTTP.
        deadline_s: bound of the whole run in **seconds**; the engine's start gets what is left of it.
        wait_s: longest wait for the spans to reach storage, **seconds**.
        log_dir: where to keep ``engine.log`` (default: a temporary directory, removed).
        settings: vLLM launch settings (default :class:`VllmSettings`).
    """
    started = time.monotonic()
    verdict = Verdict(engine=engine)
    if engine not in ("vllm", "emulator"):
        verdict.verdict = f"unknown engine {engine!r}"
        return verdict
    if engine == "vllm":
        availability = probe_vllm()
        verdict.details |= {"vllm_version": availability.vllm_version, "gpus": list(availability.gpus)}
        if not availability.usable:
            verdict.verdict = "vllm missing"
            verdict.details["missing"] = availability.missing
            return verdict
    if missing := missing_modules():
        verdict.verdict = "hotspan dependencies missing"
        verdict.details["missing"] = missing
        return verdict
    from instrumented_stack.engine.process import EngineProcess
    from instrumented_stack.engine.vllm_backend import VllmSettings

    vllm = settings or VllmSettings()
    work = Path(tempfile.mkdtemp(prefix="hotspan-device-check-"))
    own_server = server is None
    process = None
    try:
        if server is None:
            from hotspan.server import start_server
            from hotspan.settings import load_settings

            server = start_server(
                load_settings(
                    data_dir=work / "hotspan",
                    clickhouse_dsn=f"chdb://{work / 'chdb'}",
                    clickhouse_database="device_check",
                    http_port=0,
                    grpc_port=0,
                )
            )
        engine_endpoint = f"http://127.0.0.1:{server.grpc_port}" if protocol == "grpc" else server.base_url
        launch = engine_launch(engine, work, engine_endpoint, protocol, vllm)
        verdict.details["engine_command"] = " ".join(
            arg if len(arg) <= 80 else arg[:77] + "..." for arg in launch.command
        )
        remaining = deadline_s - (time.monotonic() - started) - wait_s - 30.0
        process = EngineProcess(
            launch, (log_dir or work) / "engine.log", start_timeout_s=max(remaining, 10.0), stop_timeout_s=30.0
        )
        process.start()
        verdict.details["engine_start_s"] = round(time.monotonic() - started, 1)
        trace_ids = asyncio.run(_send_requests(process.url, server.base_url, requests, prompt_tokens, max_tokens))
        rows = _wait_for_spans(server.storage.reader, trace_ids, wait_s)
        judged = judge_spans(rows, trace_ids, MODEL_NAME)
        verdict.ok = judged.pop("ok")
        verdict.details |= {"requests": len(trace_ids), **judged}
        verdict.verdict = (
            "llm_request spans nest under the client span with the emulator's attribute set"
            if verdict.ok
            else "llm_request spans differ from the emulator's (see problems)"
        )
    except Exception as error:  # the verdict line must come out whatever failed
        verdict.verdict = f"error: {type(error).__name__}"
        verdict.details["error"] = str(error)[-2000:]
        if process is not None:
            verdict.details["engine_log_tail"] = process.log_tail(20)
    finally:
        if process is not None:
            verdict.details["engine_exit_status"] = process.stop()
        if own_server and server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
        verdict.details["elapsed_s"] = round(time.monotonic() - started, 1)
    return verdict


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.device_check``: print the verdict line; exit 0 ok, 1 failed, 2 no vLLM,
    3 Hotspan's dependencies missing."""
    parser = argparse.ArgumentParser(prog="python -m tools.device_check", description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("vllm", "emulator"), default="vllm")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--protocol", choices=("grpc", "http/protobuf"), default="grpc")
    parser.add_argument("--deadline-s", type=float, default=450.0)
    parser.add_argument("--wait-s", type=float, default=60.0)
    parser.add_argument("--log-dir", type=Path, help="keep engine.log and verdict.json here")
    args = parser.parse_args(argv)
    verdict = run_device_check(
        args.engine,
        requests=args.requests,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        protocol=args.protocol,
        deadline_s=args.deadline_s,
        wait_s=args.wait_s,
        log_dir=args.log_dir,
    )
    line = verdict.to_json()
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
        (args.log_dir / "verdict.json").write_text(line + "\n", encoding="utf-8")
    print(line, flush=True)
    if verdict.verdict == "vllm missing":
        return EXIT_VLLM_MISSING
    if verdict.verdict == "hotspan dependencies missing":
        return EXIT_DEPENDENCIES_MISSING
    return EXIT_OK if verdict.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
