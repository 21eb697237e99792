"""Cost of payload redaction on the insert path (issue 32), side by side in one run.

The inserter's CPU per group, on the requests of ``benchmarks/ingest.py`` (512 spans per request, 20 GenAI and
HTTP attributes per span, no message attributes) and on the same requests with a 1 KiB
``gen_ai.input.messages`` (an e-mail address in it) on every fifth span, in spans per second:

(a) the conversion the inserter runs (``RequestConverter.convert``: the compiled scanner), redaction off;
(b) the same with the packaged rules: the scanner's prefilter (each span and event attribute key and event name
    against the table's literal starts), and for requests that hold a named key the parse, the rules, the
    serialization and the scanner again.

The last lines give (b) / (a) for both kinds of request. The ClickHouse insert that follows is the same in both and
is left out, so the ratio is the worst case for the whole path.

Run: ``python benchmarks/redaction.py [--spans 51200]`` (about 30 s on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

from benchmarks.ingest import build_requests  # noqa: E402
from collector.limits import SpanLimits  # noqa: E402
from collector.native_writer import RequestConverter  # noqa: E402
from collector.redaction import Redactor, packaged_table  # noqa: E402

GROUP_REQUESTS = 40
"""Requests per group: 20,480 spans, about ``HOTSPAN_BATCH_MAX_SPANS``'s default of 20,000."""

MESSAGE = (
    '[{"role":"user","parts":[{"type":"text","content":"'
    + "Please check my order and the refund policy for tents. " * 16
    + 'Reach me at jane.roe@example.org."}]}]'
)


def with_messages(bodies: list[bytes]) -> list[bytes]:
    """The requests with ``MESSAGE`` as ``gen_ai.input.messages`` on every fifth span."""
    out = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        index = 0
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if index % 5 == 0:
                        span.attributes.add(key="gen_ai.input.messages").value.string_value = MESSAGE
                    index += 1
        out.append(request.SerializeToString())
    return out


def best_s(run: Callable[[], None], repeats: int = 3) -> float:
    """The least CPU time of ``repeats`` runs, seconds of this process (every thread: RE2 in ``pyarrow.compute`` may
    use others), which depends less on the shared host's load than wall time; the minimum is the least disturbed."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=51_200, help="spans per measurement (default 51200)")
    args = parser.parse_args()
    plain_converter = RequestConverter(SpanLimits())
    redacting = RequestConverter(SpanLimits(), Redactor(packaged_table()))
    plain = build_requests(args.spans)
    kinds = {"no message attributes": plain, "messages on 1 span in 5": with_messages(plain)}
    for kind, bodies in kinds.items():
        pairs = [(body, "default") for body in bodies]
        groups = [pairs[i : i + GROUP_REQUESTS] for i in range(0, len(pairs), GROUP_REQUESTS)]

        def convert(converter: RequestConverter, groups: list[list[tuple[bytes, str]]] = groups) -> None:
            for group in groups:
                converter.convert(group, [[]] * len(group))

        off, on = best_s(lambda: convert(plain_converter)), best_s(lambda: convert(redacting))
        print(f"{kind}: (a) off {args.spans / off:,.0f} spans/s  (b) default rules {args.spans / on:,.0f} spans/s")
        print(f"redaction_ratio[{kind}]: {off / on:.2f}", flush=True)


if __name__ == "__main__":
    main()
