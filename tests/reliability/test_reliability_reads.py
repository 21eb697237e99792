"""Reads stay off the ingest path, within budgets (issue 28, item 4; a real ``hotspan serve`` subprocess).

- Heavy reads run while a steady OTLP/HTTP sender exports every 0.1 s: its export latency p99 stays within a second of
  its p99 with no read running, and ``/healthz`` answers meanwhile (issue 28: one heavy Jaeger search stalled every
  export and ``/healthz`` for 9 s, four for 37 s). The reads: 4 and 20 clients searching (whole traces of 12,288 spans
  each); 8 clients reading analyses (critical path, stages, flame graph of a 512-span trace, a diagnosis of 32 traces)
  with one read thread and no queue, which must be refused with 503 ``reads_busy`` and ``Retry-After``; 8 clients
  loading the trace page in the UI (its pages router callback) with the same settings.
- Reads that would exceed a budget are refused with a 4xx, never a 5xx: 2,000 ``attr=`` / ``tag=`` filters (400), a
  5,000-digit ``lookback`` (400), a search whose traces hold more spans than ``HOTSPAN_MAX_SEARCH_SPANS`` (413), a v3
  ``query.searchDepth`` past the documented cap (answered as the cap, then 413 here).
- The store's budgets are answered on every kind of read route: a tiny ``HOTSPAN_READ_TIMEOUT_S`` gives searches and
  analyses 503 ``read_timeout`` with ``Retry-After``, and 64 MiB of ``HOTSPAN_READ_MAX_MEMORY_BYTES`` (the least it may
  be) gives a search through 92 MB of attributes 413 ``read_too_large``.

Every server serves a copy of one store, loaded once (:func:`stored`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from flood import batch, with_trace
from reads import BASE_NS, SpanSpec, request
from served import ServedHotspan, serve

from testkit import dash_update_body

Figure = Callable[[str, object, str], None]
Read = Callable[[httpx.Client, str, int], httpx.Response]
"""One read a client makes: ``read(client, base_url, number)``, ``number`` counting the client's reads."""
PROTOBUF = {"content-type": "application/x-protobuf"}
TRACES = 32
"""Traces of service ``flood`` stored, 512 spans each (20 attributes per span): 16,384 spans."""
SEARCH = {"service": "flood", "limit": "24", "lookback": "2h"}
"""A heavy search: 24 whole traces, 12,288 spans, about 25 MB of Jaeger JSON (seconds of conversion)."""
BIG_TRACES = 8
"""Traces of service ``big`` stored, 16 spans of 12 attributes of 60,000 characters each: 92 MB of attributes."""
BIG_SEARCH = {"service": "big", "limit": str(BIG_TRACES), "lookback": "2h"}
"""A search for every ``big`` trace: more memory than 64 MiB to read."""
WINDOW = {"start_ns": BASE_NS - 3600 * 10**9, "end_ns": BASE_NS + 3600 * 10**9}

_STEADY = """
import json, sys, threading, time, httpx
url, health, body = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
until = time.monotonic() + float(sys.argv[4])
exports, probes = [], []

def export():
    with httpx.Client(timeout=120) as client:
        number = 0
        while time.monotonic() < until:
            trace = (10**9 + number).to_bytes(16, "big")
            started = time.monotonic()
            answer = client.post(url, content=body.replace(b"\\xab" * 16, trace),
                                 headers={"content-type": "application/x-protobuf"})
            exports.append((answer.status_code, time.monotonic() - started))
            number += 1
            time.sleep(0.1)

def probe():
    with httpx.Client(timeout=120) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            client.get(health)
            probes.append(time.monotonic() - started)
            time.sleep(0.1)

threads = [threading.Thread(target=export), threading.Thread(target=probe)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"exports": exports, "health": probes}))
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped Hotspan's data directory holding :data:`TRACES` traces of 512 spans (service ``flood``) and
    :data:`BIG_TRACES` of large attributes (service ``big``), all in ClickHouse; none analysed."""
    served = serve(tmp_path_factory.mktemp("reads"), trace_idle_s="3600")
    template = batch(512)
    with httpx.Client(timeout=120) as client:
        for number in range(TRACES):
            answer = client.post(f"{served.base_url}/v1/traces", content=with_trace(template, number), headers=PROTOBUF)
            assert answer.status_code == 200
        for number in range(BIG_TRACES):
            attributes = {f"big.{key}": chr(97 + (number + key) % 26) * 60_000 for key in range(12)}
            spans = [SpanSpec(index + 1, start_ns=index, attributes=attributes) for index in range(16)]
            body = request(10**6 + number, spans, "big")
            assert client.post(f"{served.base_url}/v1/traces", content=body, headers=PROTOBUF).status_code == 200
    served.wait_drained(300)
    served.stop()
    return served.data_dir


def _serve_copy(stored: Path, where: Path, **settings: str) -> ServedHotspan:
    """A served Hotspan on a copy of ``stored`` at ``where`` with those ``HOTSPAN_*`` settings; no trace analysed
    during the test (its CPU would blur the figures). The store's links (``metadata/<db>`` to ``store/...``) are
    relative: copied as links, they point into the copy."""
    copy = shutil.copytree(stored, where, symlinks=True)
    return serve(copy, trace_idle_s="3600", **settings)


@pytest.fixture
def serve_stored(stored: Path, tmp_path: Path) -> Iterator[Callable[..., ServedHotspan]]:
    """``serve_stored(**settings)``: :func:`_serve_copy` of :func:`stored`, killed after the test."""
    started: list[ServedHotspan] = []

    def start(**settings: str) -> ServedHotspan:
        started.append(_serve_copy(stored, tmp_path / f"store{len(started)}", **settings))
        return started[-1]

    yield start
    for served in started:
        served.kill()


@pytest.fixture(scope="module")
def server(stored: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHotspan]:
    """A served Hotspan on a copy of :func:`stored`, searches bounded at 14,000 spans; one read runs at a time and two
    may wait."""
    where = tmp_path_factory.mktemp("searches") / "store"
    served = _serve_copy(stored, where, max_search_spans="14000", read_workers="1", read_queue="2")
    yield served
    served.kill()


@pytest.fixture(scope="module")
def one_reader(stored: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHotspan]:
    """A served Hotspan on a copy of :func:`stored` that runs one read at a time and lets none wait (the API's and,
    on a count of their own, the UI's)."""
    served = _serve_copy(stored, tmp_path_factory.mktemp("one_reader") / "store", read_workers="1", read_queue="0")
    yield served
    served.kill()


def _steady_sender(server: ServedHotspan, body: Path, seconds: float) -> subprocess.Popen[str]:
    """A sender exporting ``body`` every 0.1 s after its last answer and a ``/healthz`` probe as often, for
    ``seconds``, from a process of its own (so the readers' client threads cannot delay its timing); it prints
    ``{"exports": [[status, seconds], ...], "health": [seconds, ...]}``."""
    base = server.base_url
    command = [sys.executable, "-c", _STEADY, f"{base}/v1/traces", f"{base}/healthz", str(body), str(seconds)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Contention:
    """What :func:`contend` measured: the readers' answers, and the steady sender's with and without them."""

    statuses: Counter[int] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    """503 answers by error code (``reads_busy``, ``read_timeout``; ``jaeger``: Jaeger's envelope, which has none)."""
    hints: list[str | None] = field(default_factory=list)
    """``Retry-After`` of every 503."""
    export_statuses: set[int] = field(default_factory=set)
    exports: list[float] = field(default_factory=list)
    health: list[float] = field(default_factory=list)
    alone_exports: list[float] = field(default_factory=list)
    alone_health: list[float] = field(default_factory=list)

    def report(self, figure: Figure, reads: str) -> None:
        """Record the figures, ``reads`` naming what the readers did."""
        p99, alone_p99 = _quantile(self.exports, 0.99), _quantile(self.alone_exports, 0.99)
        figure(f"{reads} answered (status: count)", dict(self.statuses), "200s, and 503s with Retry-After")
        figure(
            f"steady exports during {reads}: count / p99 / max (s); p99 with no read",
            f"{len(self.exports)} / {p99:.2f} / {max(self.exports):.2f}; {alone_p99:.2f}",
            "p99 < 1 s more than with no read",
        )
        figure(
            f"/healthz max (s) during {reads}; with no read",
            f"{max(self.health):.2f}; {max(self.alone_health):.2f}",
            "< 1",
        )

    def assert_some_refused_busy(self) -> None:
        """Some reads answered, the others (more clients than room) refused: 503 ``reads_busy`` with a
        ``Retry-After``, nothing else."""
        assert self.statuses[200] > 0, "no read finished: nothing was measured"
        assert self.statuses[503] > 0, "more clients than room for their reads, yet none was refused"
        assert set(self.statuses) == {200, 503}
        assert set(self.refusals) == {"reads_busy"} and all(hint and hint.isdigit() for hint in self.hints)

    def assert_ingest_unharmed(self) -> None:
        """Every export answered 200, their p99 within a second of the p99 with no read, ``/healthz`` within one."""
        assert self.export_statuses == {200}
        assert _quantile(self.exports, 0.99) < _quantile(self.alone_exports, 0.99) + 1.0
        assert max(self.health) < 1.0


def contend(server: ServedHotspan, tmp_path: Path, clients: int, read: Read, seconds: float = 12.0) -> Contention:
    """Run the steady sender alone for 6 s (the control: on a machine shared with other work its exports wait for
    fsync and CPU, 0.3-0.8 s p99 at load 10-17 on two cores, 0.01 s idle), then for ``seconds`` beside ``clients``
    threads each making ``read`` after ``read`` until 2 s before the end, waiting ``Retry-After`` after a 503 as a
    client should."""
    body = tmp_path / "steady.bin"
    body.write_bytes(batch(10))
    alone = json.loads(_steady_sender(server, body, 6).communicate(timeout=120)[0])
    steady = _steady_sender(server, body, seconds)
    found = Contention()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds - 2

    def reader(first: int) -> None:
        with httpx.Client(timeout=300) as client:
            number = first
            while time.monotonic() < deadline:
                answer = read(client, server.base_url, number)
                number += clients
                with lock:
                    found.statuses[answer.status_code] += 1
                    if answer.status_code == 503:
                        found.hints.append(answer.headers.get("retry-after"))
                        found.refusals[answer.json().get("error", {}).get("code", "jaeger")] += 1
                if answer.status_code == 503:
                    time.sleep(float(answer.headers.get("retry-after", "1")))

    threads = [threading.Thread(target=reader, args=(first,)) for first in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    during = json.loads(steady.communicate(timeout=300)[0])
    found.export_statuses = {status for status, _ in during["exports"]}
    found.exports = [seconds for _, seconds in during["exports"]]
    found.health = during["health"]
    found.alone_exports = [seconds for _, seconds in alone["exports"]]
    found.alone_health = alone["health"]
    return found


def _search(client: httpx.Client, base: str, _number: int) -> httpx.Response:
    return client.get(f"{base}/api/traces", params=SEARCH)


ANALYSES = ("critical-path", "stages", "flamegraph")
"""Per-trace analyses the analysis readers cycle through, with a diagnosis of every ``flood`` trace between."""


def _analysis(client: httpx.Client, base: str, number: int) -> httpx.Response:
    if number % (len(ANALYSES) + 1) == len(ANALYSES):
        return client.get(f"{base}/api/v1/diagnosis", params={**WINDOW, "service": "flood", "limit": TRACES})
    trace_id = f"{number % TRACES + 1:032x}"
    return client.get(f"{base}/api/v1/traces/{trace_id}/{ANALYSES[number % (len(ANALYSES) + 1)]}")


@pytest.mark.parametrize("searchers", [4, 20])
def test_a_steady_sender_is_answered_fast_while_heavy_searches_run(
    server: ServedHotspan, tmp_path: Path, figure: Figure, searchers: int
) -> None:
    found = contend(server, tmp_path, searchers, _search)
    found.report(figure, f"{searchers} clients' searches of 12,288 spans")
    assert found.statuses[200] > 0, "no heavy search finished: nothing was measured"
    assert set(found.statuses) <= {200, 503} and all(hint and hint.isdigit() for hint in found.hints)
    found.assert_ingest_unharmed()


def test_heavy_analyses_past_the_read_pool_are_refused_and_ingest_is_answered_fast(
    one_reader: ServedHotspan, tmp_path: Path, figure: Figure
) -> None:
    found = contend(one_reader, tmp_path, 8, _analysis)
    found.report(figure, "8 clients' analyses (1 read thread, none waiting)")
    found.assert_some_refused_busy()
    found.assert_ingest_unharmed()


def test_ui_page_loads_past_their_admission_are_refused_and_ingest_is_answered_fast(
    one_reader: ServedHotspan, tmp_path: Path, figure: Figure
) -> None:
    dependencies = httpx.get(f"{one_reader.base_url}/ui/_dash-dependencies", timeout=60).json()
    (router,) = [d for d in dependencies if "_pages_content.children" in d["output"]]

    def page_load(client: httpx.Client, base: str, number: int) -> httpx.Response:
        # The pages router's callback of a trace page: it reads the 512-span trace and builds the page.
        path = f"/ui/trace/{number % TRACES + 1:032x}"
        body = dash_update_body(router, {"_pages_location.pathname": path, "_pages_location.search": ""})
        return client.post(f"{base}/ui/_dash-update-component", json=body)

    found = contend(one_reader, tmp_path, 8, page_load)
    found.report(figure, "8 clients' trace page callbacks (1 at a time, none waiting)")
    found.assert_some_refused_busy()
    found.assert_ingest_unharmed()


def test_reads_past_the_time_budget_answer_503_with_retry_after(
    serve_stored: Callable[..., ServedHotspan], figure: Figure
) -> None:
    base = serve_stored(read_timeout_s="0.001").base_url
    trace_id = f"{1:032x}"
    with httpx.Client(timeout=120) as client:
        answers = {
            "Jaeger search": client.get(f"{base}/api/traces", params=SEARCH),
            "v1 search": client.get(f"{base}/api/v1/traces", params={**WINDOW, "limit": 100}),
            "critical path": client.get(f"{base}/api/v1/traces/{trace_id}/critical-path"),
            "diagnosis": client.get(f"{base}/api/v1/diagnosis", params={**WINDOW, "limit": TRACES}),
        }
    figure("statuses with HOTSPAN_READ_TIMEOUT_S=0.001", {k: a.status_code for k, a in answers.items()}, "503")
    assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(answers, 503)
    assert all(answer.headers.get("retry-after") == "1" for answer in answers.values())
    assert "HOTSPAN_READ_TIMEOUT_S" in answers["Jaeger search"].json()["errors"][0]["msg"]
    del answers["Jaeger search"]
    assert {answer.json()["error"]["code"] for answer in answers.values()} == {"read_timeout"}


def test_reads_past_the_memory_budget_answer_413(serve_stored: Callable[..., ServedHotspan], figure: Figure) -> None:
    base = serve_stored(read_max_memory_bytes=str(64 * 1024**2)).base_url
    with httpx.Client(timeout=120) as client:
        small = client.get(f"{base}/api/traces", params={**SEARCH, "limit": "2"})
        answers = {
            "Jaeger search": client.get(f"{base}/api/traces", params=BIG_SEARCH),
            "v3 search": client.get(
                f"{base}/api/v3/traces",
                params={
                    "query.serviceName": "big",
                    "query.startTimeMin": "2000-01-01T00:00:00Z",
                    "query.startTimeMax": "2100-01-01T00:00:00Z",
                },
            ),
        }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    figure(
        "searches through 92 MB of attributes with 64 MiB per read; a search of 1,024 small spans",
        (statuses, small.status_code),
        "413; 200",
    )
    assert small.status_code == 200
    assert statuses == dict.fromkeys(answers, 413)
    assert "HOTSPAN_READ_MAX_MEMORY_BYTES" in answers["Jaeger search"].json()["errors"][0]["msg"]
    assert "HOTSPAN_READ_MAX_MEMORY_BYTES" in answers["v3 search"].json()["error"]["message"]


def test_reads_past_a_budget_are_refused_with_a_4xx(server: ServedHotspan, figure: Figure) -> None:
    base = server.base_url
    window = {"start_ns": BASE_NS - 3600 * 10**9, "end_ns": BASE_NS + 3600 * 10**9}
    filters = [f"k{index}:v" for index in range(2000)]
    with httpx.Client(timeout=120) as client:
        answers = {
            "2,000 attr= filters": client.get(f"{base}/api/v1/traces", params={**window, "attr": filters}),
            "2,000 Jaeger tag= filters": client.get(f"{base}/api/traces", params={"service": "flood", "tag": filters}),
            "5,000-digit lookback": client.get(
                f"{base}/api/traces", params={"service": "flood", "lookback": "9" * 5000}
            ),
            "5,000-digit lookback with a unit": client.get(
                f"{base}/api/traces", params={"service": "flood", "lookback": "9" * 5000 + "h"}
            ),
            "a search past HOTSPAN_MAX_SEARCH_SPANS": client.get(
                f"{base}/api/traces", params={**SEARCH, "limit": "2147483647"}
            ),
            "v3 searchDepth past its cap": client.get(
                f"{base}/api/v3/traces",
                params={
                    "query.serviceName": "flood",
                    "query.startTimeMin": "2000-01-01T00:00:00Z",
                    "query.startTimeMax": "2100-01-01T00:00:00Z",
                    "query.searchDepth": "2147483647",
                },
            ),
        }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    figure("statuses", statuses, "4xx, never 5xx")
    assert statuses == {
        "2,000 attr= filters": 400,
        "2,000 Jaeger tag= filters": 400,
        "5,000-digit lookback": 400,
        "5,000-digit lookback with a unit": 400,
        "a search past HOTSPAN_MAX_SEARCH_SPANS": 413,
        "v3 searchDepth past its cap": 413,
    }
    assert answers["2,000 attr= filters"].json()["error"]["code"] == "invalid_parameter"
    assert "HOTSPAN_MAX_SEARCH_SPANS" in answers["a search past HOTSPAN_MAX_SEARCH_SPANS"].json()["errors"][0]["msg"]
    assert "HOTSPAN_MAX_SEARCH_SPANS" in answers["v3 searchDepth past its cap"].json()["error"]["message"]
