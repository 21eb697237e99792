"""A fuzz campaign against a served Hotspan: mutated OTLP protobuf and JSON bodies (plain and gzip) over OTLP/HTTP,
mutated protobuf over OTLP/gRPC, from seeds that are real trace files. Goal: no 5xx, no gRPC INTERNAL/UNKNOWN, and
the server alive and healthy at the end.

Size: ``HOTSPAN_FUZZ_PAYLOADS`` payloads (default 2500 in the CI form, 1,000,000 with ``HOTSPAN_RELIABILITY=long``:
about an hour on two cores); the mutations are seeded (``HOTSPAN_FUZZ_SEED``, default 17), so a failing payload can
be made again.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import httpx
import pytest
from flood import batch
from scale import sized
from served import serve

from collector.formats import Payload, read_payloads
from testkit import TRACES

PAYLOADS = int(os.environ.get("HOTSPAN_FUZZ_PAYLOADS", str(sized(2500, 1_000_000))))
SEED = int(os.environ.get("HOTSPAN_FUZZ_SEED", "17"))
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _seeds() -> tuple[list[bytes], list[bytes]]:
    """Protobuf and JSON bodies of real trace files (every shared OTLP, Jaeger and Zipkin file, converted)."""
    protobuf, documents = [batch(20)], []
    for folder in ("otlp", "jaeger", "zipkin"):
        for path in sorted((TRACES / folder).iterdir()):
            for item in read_payloads(path):
                if isinstance(item, Payload) and isinstance(item.body, bytes):
                    protobuf.append(item.body)
                elif isinstance(item, Payload):
                    documents.append(json.dumps(item.body).encode())
    return protobuf, documents


def _mutate(rnd: random.Random, body: bytes, other: bytes) -> bytes:
    """One random mutation: flipped bytes, inserted or deleted runs, a cut, a splice with another seed, a repeat."""
    data = bytearray(body)
    match rnd.randrange(6):
        case 0:
            for _ in range(rnd.randint(1, 8)):
                if data:
                    data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        case 1:
            at = rnd.randrange(len(data) + 1)
            data[at:at] = rnd.randbytes(rnd.randint(1, 32))
        case 2:
            at = rnd.randrange(len(data) + 1)
            del data[at : at + rnd.randint(1, 64)]
        case 3:
            del data[rnd.randrange(len(data) + 1) :]
        case 4:
            data = data[: rnd.randrange(len(data) + 1)] + other[rnd.randrange(len(other) + 1) :]
        case _:
            piece = data[: rnd.randrange(len(data) + 1)]
            data = data + piece * rnd.randint(1, 4)
    return bytes(data)


def _payloads(count: int) -> Iterator[tuple[str, bytes, bool]]:
    """``(media, body, gzip)`` mutations of the seeds, ``count`` of them."""
    rnd = random.Random(SEED)
    protobuf, documents = _seeds()
    for _ in range(count):
        if rnd.random() < 0.5:
            media, pool = "application/x-protobuf", protobuf
        else:
            media, pool = "application/json", documents
        body = _mutate(rnd, rnd.choice(pool), rnd.choice(pool))
        yield media, body, rnd.random() < 0.2


# About 2 ms a payload on two cores: the suite's 300 s limit fits the CI form, not 1M payloads (about 35 min).
@pytest.mark.timeout(max(300, PAYLOADS // 200))
def test_fuzzed_bodies_never_get_a_server_error_or_crash_the_server(
    tmp_path: Path, figure: Callable[..., None]
) -> None:
    server = serve(tmp_path)
    url = f"{server.base_url}/v1/traces"
    statuses: Counter[int] = Counter()
    grpc_codes: Counter[str] = Counter()

    def send(job: tuple[int, tuple[str, bytes, bool]]) -> None:
        number, (media, body, compressed) = job
        if number % 10 == 0 and media == "application/x-protobuf":
            try:
                export(body, timeout=60)
                grpc_codes["OK"] += 1
            except grpc.RpcError as exc:
                grpc_codes[exc.code().name] += 1
            return
        headers = {"content-type": media, **({"content-encoding": "gzip"} if compressed else {})}
        answer = client.post(url, content=gzip.compress(body) if compressed else body, headers=headers)
        statuses[answer.status_code] += 1

    try:
        with (
            httpx.Client(timeout=60, limits=httpx.Limits(max_connections=4)) as client,
            grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel,
            ThreadPoolExecutor(4) as pool,
        ):
            export = channel.unary_unary(EXPORT)
            list(pool.map(send, enumerate(_payloads(PAYLOADS))))
        alive = server.process.poll() is None
        healthy = httpx.get(f"{server.base_url}/healthz", timeout=10).json()["status"]
    finally:
        server.kill()

    server_errors = sum(count for status, count in statuses.items() if status >= 500)
    figure(f"{PAYLOADS} fuzzed payloads: HTTP answers", dict(sorted(statuses.items())), "no 5xx")
    figure("gRPC answers", dict(grpc_codes), "no INTERNAL or UNKNOWN")
    figure("5xx; server alive and healthy after", (server_errors, alive, healthy), "(0, True, 'ok')")
    assert server_errors == 0
    assert not {"INTERNAL", "UNKNOWN"} & set(grpc_codes)
    assert alive and healthy == "ok"
