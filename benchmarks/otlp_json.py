"""What OTLP/JSON costs per span: the receivers' JSON decode and ``hotspan import`` of a JSON lines file.

The spans are ``benchmarks/ingest.py``'s (512 a request, about 20 GenAI and HTTP attributes each, some events,
links and error statuses), written as OTLP/JSON (lowerCamelCase keys, hex IDs) one request a line. Measured, CPU
µs per span (``time.process_time``, best of ``--repeats``; the load average beside each):

- ``json.loads`` of the lines alone: the floor the decode below stands on;
- :func:`collector.otlp_json.parse_json_bytes` + :func:`collector.otlp_json.request_from_json`: the OTLP/HTTP
  receiver's JSON decode (then the check, :func:`collector.batch.check_request`, timed apart);
- ``hotspan import`` of the file into a fresh embedded store (:func:`hotspan.importer.import_paths` through
  :class:`hotspan.importer.StoreSink`, the CLI's local path): reading, decoding, checking, converting and
  inserting; the analysis the CLI runs afterwards is not included (``benchmarks/analysis_throughput.py``).

The process's objects are first frozen out of the garbage collector's passes (``gc.freeze``), as ``hotspan import``
and ``hotspan serve`` do.

Run: ``python benchmarks/otlp_json.py [--spans 51200] [--repeats 3]`` (about a minute). The last line is
``import_us_per_span: N``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)
sys.path.append(str(REPO / "tests"))


def best_us_per_span(run: Callable[[], object], spans: int, repeats: int) -> float:
    """The least CPU time of ``repeats`` runs of ``run``, in µs per span."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return min(times) * 1e6 / spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=51_200, help="spans in the file (default 51200)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (default 3)")
    args = parser.parse_args()

    from cluster_kit import open_engine
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from benchmarks.ingest import build_requests
    from collector.batch import check_request
    from collector.otlp_json import parse_json_bytes, request_from_json
    from hotspan.importer import StoreSink, import_paths
    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations
    from storage.writer import ClickHouseTraceWriter

    directory = Path(tempfile.mkdtemp(prefix="hotspan-otlp-json-"))
    lines = [
        json.dumps(json_format.MessageToDict(ExportTraceServiceRequest.FromString(body))).encode()
        for body in build_requests(args.spans)
    ]
    path = directory / "spans.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    print(f"{args.spans:,} spans, {len(lines)} lines, {path.stat().st_size / args.spans:.0f} bytes a span")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    gc.freeze()  # as `hotspan import` does before it reads (hotspan/cli.py)
    figures: dict[str, tuple[float, float]] = {}

    def measure(label: str, run: Callable[[], object]) -> None:
        figures[label] = (best_us_per_span(run, args.spans, args.repeats), os.getloadavg()[0])

    def each(step: Callable[[bytes], object]) -> Callable[[], None]:
        # Each result dropped before the next, as the receiver drops a request once spooled: a list of every
        # parsed document would time the garbage collector's walks over it instead.
        def run() -> None:
            for line in lines:
                step(line)

        return run

    measure("json.loads", each(json.loads))
    measure("receiver's JSON decode", each(lambda line: request_from_json(parse_json_bytes(line))))
    requests = [request_from_json(parse_json_bytes(line))[0] for line in lines]
    measure("check_request", lambda: [check_request(request) for request in requests])

    dsn = open_engine(directory)
    import_s = []
    for run in range(args.repeats):
        store = ClickHouse(dsn, f"import_{run}")
        store.command(f"CREATE DATABASE IF NOT EXISTS {store.database}")
        apply_migrations(store)
        started = time.process_time()
        summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False)
        import_s.append(time.process_time() - started)
        assert summary.spans == args.spans, summary.render()
    figures["hotspan import (local store)"] = (min(import_s) * 1e6 / args.spans, os.getloadavg()[0])

    print(f"{'CPU µs per span (load)':<32} {'µs':>8}")
    for label, (us, load) in figures.items():
        print(f"{label:<32} {us:>8.1f} ({load:.1f})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"import_us_per_span: {figures['hotspan import (local store)'][0]:.1f}")


if __name__ == "__main__":
    main()
