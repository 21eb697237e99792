"""Ingest throughput, side by side in one run: decode, raw insert, and Hotspan's whole path.

Builds realistic OTLP requests (``--spans`` spans, 512 per request as the SDK's BatchSpanProcessor
sends them, 5 services as resources, about 20 GenAI and HTTP attributes per span, some events,
links and error statuses) and measures, in spans per second:

(a) protobuf decode alone: ``ExportTraceServiceRequest.FromString`` of every request;
(b) a raw columnar insert of the same spans alone, the fastest one: the ``Native`` blocks the compiled
    scanner (:func:`collector.native_writer.native_rows`) makes of the requests, built before the clock
    starts, inserted in one ``ClickHouse.insert_raw`` into a fresh ``otel_traces`` (same migrations, so
    the same materialized views) of the embedded ClickHouse; only the insert is timed;
(b') for information, the same spans as Arrow tables (``to_batch``, built before the clock) inserted
    with ``ClickHouse.insert_arrow`` into another fresh ``otel_traces``; not used in the ratio;
(c) Hotspan's whole path over OTLP/HTTP (protobuf): a separate client process sends the requests
    over ``--senders`` keep-alive connections to a served Hotspan; the clock stops when every
    request is acknowledged and the rows are counted in ``otel_traces``;
(d) the same over OTLP/gRPC.

The last line is ``ingest_ratio: X.XX`` = (c) / the time-serial limit of (a) then (b), i.e.
``c / (1 / (1/a + 1/b))``. Goal: ratio >= 0.5 and (c) >= 100k spans/s.

Run: ``python benchmarks/ingest.py [--spans 100000] [--senders 8]`` (under 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

# Run as a script, Python puts benchmarks/ first on sys.path; the repository root takes its place, so the packages
# are this checkout's.
REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

SERVICES = ("gateway", "agent", "retriever", "vllm", "tool-runner")
SPAN_NAMES = (
    "POST /v1/chat/completions",
    "chat llama-3.1-8b",
    "retrieve documents",
    "execute_tool search",
    "llm_request",
)
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
BASE_NS = 1_760_000_000_000_000_000


def _set(attributes: object, key: str, value: object) -> None:
    kv: KeyValue = attributes.add()  # type: ignore[attr-defined]
    kv.key = key
    if isinstance(value, bool):
        kv.value.bool_value = value
    elif isinstance(value, int):
        kv.value.int_value = value
    elif isinstance(value, float):
        kv.value.double_value = value
    elif isinstance(value, list):
        for item in value:
            kv.value.array_value.values.add().string_value = item
    else:
        kv.value.string_value = str(value)


def build_requests(spans: int, per_request: int = 512, seed: int = 7) -> list[bytes]:
    """Serialized requests holding ``spans`` spans in total (see the module docstring)."""
    rnd = random.Random(seed)
    bodies = []
    made = 0
    while made < spans:
        request = ExportTraceServiceRequest()
        count = min(per_request, spans - made)
        by_service: dict[str, list[int]] = {}
        for index in range(made, made + count):
            by_service.setdefault(SERVICES[index % len(SERVICES)], []).append(index)
        for service, indexes in by_service.items():
            resource_spans = request.resource_spans.add()
            resource = resource_spans.resource.attributes
            for key, value in (
                ("service.name", service),
                ("service.version", "1.4.2"),
                ("host.name", f"node-{rnd.randrange(8)}"),
                ("process.pid", rnd.randrange(1, 60_000)),
                ("telemetry.sdk.language", "python"),
                ("telemetry.sdk.name", "opentelemetry"),
                ("telemetry.sdk.version", "1.37.0"),
                ("deployment.environment", "prod"),
            ):
                _set(resource, key, value)
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = f"hotspan.bench.{service}"
            scope_spans.scope.version = "0.1"
            for index in indexes:
                _add_span(scope_spans.spans.add(), service, index, rnd)
        made += count
        bodies.append(request.SerializeToString())
    return bodies


def _add_span(span: object, service: str, index: int, rnd: random.Random) -> None:
    span.trace_id = rnd.randbytes(16)  # type: ignore[attr-defined]
    span.span_id = rnd.randbytes(8)  # type: ignore[attr-defined]
    if index % 4:
        span.parent_span_id = rnd.randbytes(8)  # type: ignore[attr-defined]
    span.name = rnd.choice(SPAN_NAMES)  # type: ignore[attr-defined]
    span.kind = rnd.choice((1, 2, 3))  # type: ignore[attr-defined]
    start = BASE_NS + index * 1_000_000 + rnd.randrange(1000)
    span.start_time_unix_nano = start  # type: ignore[attr-defined]
    span.end_time_unix_nano = start + rnd.randrange(1_000, 2_000_000_000)  # type: ignore[attr-defined]
    attributes = span.attributes  # type: ignore[attr-defined]
    for key, value in (
        ("http.request.method", "POST"),
        ("url.full", f"http://{service}:8000/v1/chat/completions"),
        ("http.response.status_code", rnd.choice((200, 200, 200, 429, 500))),
        ("server.address", service),
        ("server.port", 8000),
        ("network.protocol.version", "1.1"),
        ("user_agent.original", "python-httpx/0.28.1"),
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.request.model", rnd.choice(MODELS)),
        ("gen_ai.provider.name", "vllm"),
        ("gen_ai.usage.input_tokens", rnd.randrange(10, 8000)),
        ("gen_ai.usage.output_tokens", rnd.randrange(1, 2000)),
        ("gen_ai.request.temperature", rnd.choice((0.0, 0.2, 0.7, 1.0))),
        ("gen_ai.request.top_p", 0.95),
        ("gen_ai.latency.time_in_queue", rnd.random() * 0.5),
        ("gen_ai.latency.time_to_first_token", rnd.random() * 2),
        ("gen_ai.response.id", f"chatcmpl-{rnd.getrandbits(64):016x}"),
        ("gen_ai.response.finish_reasons", [rnd.choice(("stop", "length"))]),
        ("tenant_id", f"tenant-{rnd.randrange(20)}"),
        ("gen_ai.stream", rnd.random() < 0.5),
    ):
        _set(attributes, key, value)
    if index % 10 == 0:
        event = span.events.add()  # type: ignore[attr-defined]
        event.time_unix_nano = start + 1000
        event.name = "gen_ai.first_token"
        _set(event.attributes, "gen_ai.usage.output_tokens", 1)
    if index % 50 == 0:
        span.status.code = 2  # type: ignore[attr-defined]
        span.status.message = "upstream 500"  # type: ignore[attr-defined]
    if index % 25 == 0:
        link = span.links.add()  # type: ignore[attr-defined]
        link.trace_id = rnd.randbytes(16)
        link.span_id = rnd.randbytes(8)


def _send_http(url: str, bodies: list[bytes], senders: int) -> None:
    """Client process: POST every body, ``senders`` at a time, retrying 429/503 after Retry-After."""
    import httpx

    def run(share: list[bytes]) -> None:
        with httpx.Client(timeout=120) as client:
            for body in share:
                while True:
                    answer = client.post(url, content=body, headers={"content-type": "application/x-protobuf"})
                    if answer.status_code == 200:
                        break
                    if answer.status_code not in (429, 503):
                        raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:200]}")
                    time.sleep(float(answer.headers.get("retry-after", "1")))

    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(run, [bodies[i::senders] for i in range(senders)]))


def _send_grpc(target: str, bodies: list[bytes], senders: int) -> None:
    """Client process: call Export with every (already serialized) body, ``senders`` at a time."""
    import grpc

    def run(share: list[bytes]) -> None:
        with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            for body in share:
                while True:
                    try:
                        export(body, timeout=120)
                        break
                    except grpc.RpcError as exc:
                        if exc.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        time.sleep(1)

    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(run, [bodies[i::senders] for i in range(senders)]))


def _client(kind: str, target: str, bodies_path: str, senders: int, go: object, done: object) -> None:
    import pickle

    path = Path(bodies_path)
    bodies = pickle.loads(path.read_bytes())
    path.unlink()
    go.wait()  # type: ignore[attr-defined]
    (_send_http if kind == "http" else _send_grpc)(target, bodies, senders)
    done.set()  # type: ignore[attr-defined]


def run_client(
    kind: str, target: str, bodies: list[bytes], senders: int
) -> tuple[multiprocessing.process.BaseProcess, object, object]:
    """A started client process (``kind`` ``http`` or ``grpc``) that sends ``bodies`` to ``target`` once its
    ``go`` event is set and sets ``done`` when every one is acknowledged: ``(process, go, done)``."""
    import pickle

    context = multiprocessing.get_context("spawn")
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as handle:
        handle.write(pickle.dumps(bodies))
    go, done = context.Event(), context.Event()
    client = context.Process(target=_client, args=(kind, target, handle.name, senders, go, done))
    client.start()
    return client, go, done


def _served(kind: str, target: str, bodies: list[bytes], senders: int, count: object, expected: int) -> float:
    """Seconds from the client's first send until ``count()`` reports ``expected`` rows."""
    client, go, done = run_client(kind, target, bodies, senders)
    time.sleep(2.0)  # let the client process import and load its bodies before the clock starts
    start = time.perf_counter()
    go.set()  # type: ignore[attr-defined]
    done.wait()  # type: ignore[attr-defined]
    while count() < expected:  # type: ignore[operator]
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    join_client(client, kind)
    return elapsed


def join_client(client: multiprocessing.process.BaseProcess, kind: str) -> None:
    """Wait for a :func:`run_client` process to exit; raises RuntimeError if it failed."""
    client.join()
    if client.exitcode != 0:
        raise RuntimeError(f"{kind} client failed with exit code {client.exitcode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000, help="spans per measurement (default 100000)")
    parser.add_argument("--senders", type=int, default=8, help="concurrent client connections (default 8)")
    args = parser.parse_args()

    from collector.batch import DEFAULT_LIMITS, to_batch
    from collector.native_writer import COLUMNS, ROW_FORMAT, native_rows
    from hotspan.server import start_server
    from hotspan.settings import load_settings
    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations
    from storage.schema import with_tenant

    bodies = build_requests(args.spans)
    grpc_bodies = build_requests(args.spans, seed=8)
    print(f"{args.spans} spans in {len(bodies)} requests, {sum(map(len, bodies)) / args.spans:.0f} bytes/span")

    start = time.perf_counter()
    requests = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    decode_rate = args.spans / (time.perf_counter() - start)
    print(f"(a) protobuf decode alone:          {decode_rate:>10,.0f} spans/s")

    data_dir = Path(tempfile.mkdtemp(prefix="hotspan-bench-"))
    dsn = f"chdb://{data_dir / 'clickhouse'}"
    raw = ClickHouse(dsn, "bench_raw")
    apply_migrations(raw)
    blocks = []
    for body in bodies:
        converted = native_rows(body, "default", DEFAULT_LIMITS)
        if not isinstance(converted, tuple):
            raise RuntimeError(f"the compiled scanner leaves a benchmark request to Python: {converted}")
        blocks.append(converted[1])
    native = b"".join(blocks)
    start = time.perf_counter()
    raw.insert_raw("otel_traces", COLUMNS, native, ROW_FORMAT)
    insert_rate = args.spans / (time.perf_counter() - start)
    print(f"(b) raw Native insert alone:        {insert_rate:>10,.0f} spans/s")
    serial = 1 / (1 / decode_rate + 1 / insert_rate)
    print(f"    serial limit of (a) then (b):   {serial:>10,.0f} spans/s")
    arrow = ClickHouse(dsn, "bench_raw_arrow")
    apply_migrations(arrow)
    table = pa.concat_tables([with_tenant(to_batch(request).table, "default") for request in requests])
    start = time.perf_counter()
    arrow.insert_arrow("otel_traces", table)
    arrow_rate = args.spans / (time.perf_counter() - start)
    print(f"(b') raw Arrow insert alone:        {arrow_rate:>10,.0f} spans/s (not in the ratio)")

    settings = load_settings(
        data_dir=data_dir,
        clickhouse_dsn=dsn,
        clickhouse_database=f"bench_{uuid.uuid4().hex[:8]}",
        http_port=0,
        grpc_port=0,
    )
    server = start_server(settings)
    try:

        def count() -> int:
            return int(server.storage.clickhouse.query_rows("SELECT count() FROM otel_traces")[0][0])

        seconds = _served("http", f"{server.base_url}/v1/traces", bodies, args.senders, count, args.spans)
        http_rate = args.spans / seconds
        print(f"(c) Hotspan over OTLP/HTTP:         {http_rate:>10,.0f} spans/s ({seconds:.2f} s)")
        seconds = _served("grpc", f"127.0.0.1:{server.grpc_port}", grpc_bodies, args.senders, count, 2 * args.spans)
        print(f"(d) Hotspan over OTLP/gRPC:         {args.spans / seconds:>10,.0f} spans/s ({seconds:.2f} s)")
    finally:
        server.stop()
        raw.close()
        arrow.close()
    print(f"ingest_ratio: {http_rate / serial:.2f}")


if __name__ == "__main__":
    main()
