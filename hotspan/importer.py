"""``hotspan import``: load trace files into Hotspan (the formats ``collector.formats`` recognises: OTLP JSON,
arrays and lines of it, protobuf, Tempo answers, ConsoleSpanExporter output, Jaeger, Zipkin v2, Langfuse).

Every payload goes through the collector's own decoder, validation and redaction (``collector.redaction``), so a
file imports exactly as the same spans sent over OTLP would. The check (``collector.batch.check_request``, the
receivers' verdict) counts what the summary reports and converts nothing. Without an endpoint the request is then
converted and stored once by the server's own ingest step (``collector.ingest.Ingestor``:
``collector.native_writer``'s ``RequestConverter``, then ``TraceWriter.write_rows``) in the local store (the
embedded engine admits one process per data dir); with one it is sent over OTLP/HTTP to a running Hotspan.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import httpx
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from tqdm import tqdm

from collector.batch import Verdict, check_request, stored_names
from collector.formats import FormatError, Payload, Rejected, read_payloads
from collector.ingest import Ingestor
from collector.ingest_pipeline import IngestConfig
from collector.otlp_body import PayloadError, decode_request
from collector.otlp_json import JsonPayloadError, request_from_json
from collector.redaction import Redactor
from collector.rejections import Rejection
from storage.tenancy import DEFAULT_TENANT
from storage.writer import TraceWriter

if TYPE_CHECKING:
    from hotspan.app import Storage
    from hotspan.settings import Settings
    from processors.pipeline.trace_pipeline import PollResult


@dataclass
class ImportSummary:
    """Totals of one import run.

    Attributes:
        files: files read (including those that failed as a whole).
        spans: spans stored.
        rejected: spans refused; ``None`` counts of unreadable lines are not included.
        traces, services: distinct trace IDs and service names among stored spans.
        problems: one line per rejected span, unreadable line or unreadable file.
        warnings: notes that cost no span (e.g. a resource without service.name).
        redacted: matches masked in message attributes, per redaction rule.
    """

    files: int = 0
    spans: int = 0
    rejected: int = 0
    traces: set[str] = field(default_factory=set)
    services: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    redacted: Counter[str] = field(default_factory=Counter)

    def render(self) -> str:
        """A human summary, with at most 20 problem lines."""
        lines = [
            f"files: {self.files}  spans: {self.spans}  traces: {len(self.traces)}  "
            f"services: {len(self.services)}  rejected spans: {self.rejected}"
        ]
        if self.redacted:
            lines.append("redacted: " + ", ".join(f"{rule} {count}" for rule, count in sorted(self.redacted.items())))
        # A problem is a rejected span, or a line or file read as no span at all (not in the count above).
        lines += [f"  problem: {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"  ... and {len(self.problems) - 20} more")
        lines += [f"  warning: {w}" for w in dict.fromkeys(self.warnings)]
        return "\n".join(lines)


@dataclass(frozen=True)
class CheckedPayload:
    """One payload of a file, decoded and checked.

    Attributes:
        payload: the payload as read (its bytes or JSON, content type and source).
        request: the decoded request, redacted when the import redacts.
        rejections: the decoder's placeholders: OTLP/JSON spans it could not read (empty for protobuf).
        verdict: the check of every span (:func:`collector.batch.check_request`): what the summary counts.
    """

    payload: Payload
    request: ExportTraceServiceRequest
    rejections: list[Rejection]
    verdict: Verdict


class Sink(Protocol):
    """Where checked payloads go."""

    def send(self, checked: CheckedPayload) -> None:
        """Store or send ``checked``, or hold it for :meth:`flush`; raise on failure."""
        ...

    def flush(self) -> None:
        """Store or send what :meth:`send` held; raise on failure. Called once every file was read."""
        ...


class StoreSink:
    """Stores into the local store, under ``tenant`` (``storage.tenancy``), through the ingest step the server's
    inserters run (:class:`collector.ingest.Ingestor`): each request converted once by the served path's
    converter, and requests stored together by ``writer.write_rows`` in batches of about ``batch_spans`` spans, as
    the server's inserters store a spool group (one INSERT per line of an OTLP JSON lines file cost 0.1-0.3 s each).

    Raises:
        SinkError: from :meth:`send` or :meth:`flush`: the conversion refused other spans than the check did.
    """

    def __init__(
        self, writer: TraceWriter, tenant: str = DEFAULT_TENANT, batch_spans: int = IngestConfig.batch_max_spans
    ) -> None:
        # No redactor: the import redacts each request before its check, so the summary counts what was masked.
        self._ingestor = Ingestor(writer)
        self._tenant = tenant
        self._batch_spans = batch_spans
        self._held: list[CheckedPayload] = []
        self._held_spans = 0

    def send(self, checked: CheckedPayload) -> None:
        self._held.append(checked)
        self._held_spans += len(checked.verdict.kept) + len(checked.verdict.rejections)
        if self._held_spans >= self._batch_spans:
            self.flush()

    def flush(self) -> None:
        held, self._held, self._held_spans = self._held, [], 0
        if not held:
            return
        results = self._ingestor.export_all([(c.request, c.rejections) for c in held], self._tenant)
        for checked, result in zip(held, results, strict=True):
            if result.rejected != len(checked.verdict.rejections):
                raise SinkError(
                    f"the store's conversion rejected {result.rejected} spans of {checked.payload.source} where the "
                    f"check rejected {len(checked.verdict.rejections)}: {result.error_message}"
                )


class SinkError(RuntimeError):
    """The destination cannot take the import at all (unreachable, refusing, or disagreeing): it stops the
    run, unlike a bad file or span, which is reported and skipped."""


class OtlpHttpSink:
    """Sends each payload to a running Hotspan's ``/v1/traces`` in its own encoding.

    ``token``: a bearer token with the ``ingest`` role, for a server with an auth file; its tenant is the one
    the spans are stored under.

    Raises:
        SinkError: ``endpoint`` is not an http(s) URL; from :meth:`send`: the server cannot be reached, answered
            with an error status, or rejected other spans than the local check did.
    """

    def __init__(self, endpoint: str, timeout_s: float = 30.0, token: str | None = None) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise SinkError(f"--endpoint must be an http:// or https:// URL, got {endpoint!r}")
        self._url = endpoint.rstrip("/") + ("" if endpoint.rstrip("/").endswith("/v1/traces") else "/v1/traces")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def flush(self) -> None:
        """Nothing is held: :meth:`send` sent each payload."""

    def send(self, checked: CheckedPayload) -> None:
        payload, verdict = checked.payload, checked.verdict
        body = payload.body if isinstance(payload.body, bytes) else json.dumps(payload.body).encode()
        try:
            answer = self._client.post(self._url, content=body, headers={"content-type": payload.content_type})
        except httpx.HTTPError as exc:
            raise SinkError(f"cannot send to {self._url}: {exc} (is Hotspan serving there?)") from exc
        if answer.status_code != 200:
            raise SinkError(f"{self._url} answered {answer.status_code}: {answer.text[:300]}")
        response = ExportTraceServiceResponse()
        if payload.content_type == "application/json":
            json_format.Parse(answer.content or b"{}", response, ignore_unknown_fields=True)
        else:
            response.ParseFromString(answer.content)
        if response.partial_success.rejected_spans != len(verdict.rejections):
            raise SinkError(
                f"server rejected {response.partial_success.rejected_spans} spans where local validation "
                f"rejected {len(verdict.rejections)}: {response.partial_success.error_message}"
            )


def import_paths(
    paths: Iterable[Path], sink: Sink, *, progress: bool = True, redactor: Redactor | None = None
) -> ImportSummary:
    """Import every file; a bad file, line or span is reported and the rest still imported.

    Args:
        redactor: masks message attributes of each request before it is stored (the served path's redaction);
            None for none (a sink that sends to a server leaves it to the server's own).

    Returns:
        The run's :class:`ImportSummary`.
    """
    summary = ImportSummary()
    bar = tqdm(unit=" spans", disable=not progress, desc="import")
    for path in paths:
        summary.files += 1
        try:
            for item in read_payloads(path):
                if isinstance(item, Rejected):
                    summary.rejected += item.span_count or 0
                    summary.problems.append(f"{item.source}: {item.reason}")
                    continue
                stored = _import_payload(item, sink, summary, redactor)
                bar.update(stored)
        except (FormatError, OSError) as exc:
            summary.problems.append(f"{path}: {exc}")
    sink.flush()
    bar.close()
    return summary


def _import_payload(payload: Payload, sink: Sink, summary: ImportSummary, redactor: Redactor | None) -> int:
    try:
        if isinstance(payload.body, bytes):
            request, rejections = decode_request(payload.body, payload.content_type)
        else:
            request, rejections = request_from_json(payload.body)
    except (PayloadError, JsonPayloadError) as exc:
        summary.problems.append(f"{payload.source}: {exc}")
        return 0
    if redactor is not None:
        summary.redacted += redactor.redact_request(request)
    verdict = check_request(request, rejections)
    sink.send(CheckedPayload(payload, request, rejections, verdict))
    summary.spans += len(verdict.kept)
    summary.rejected += len(verdict.rejections)
    summary.problems += [_problem(payload, rejection) for rejection in verdict.rejections]
    summary.warnings += [f"{payload.source}: {w}" for w in verdict.warnings]
    traces, services = stored_names(request, verdict.kept)
    summary.traces.update(traces)
    summary.services.update(services)
    return len(verdict.kept)


def _problem(payload: Payload, rejection: Rejection) -> str:
    """A rejected span's line: its place in the file when the payload was converted from another format (Jaeger,
    Zipkin, ...: the request's path names a span of a request the file never held), else the payload's source
    and the request's path."""
    where = payload.span_sources.get(rejection.position) if rejection.position is not None else None
    return f"{where}: {rejection.reason}" if where else f"{payload.source}: {rejection}"


def analyse_stored(storage: Storage, settings: Settings) -> PollResult:
    """Analyse now every stored trace the trace pipeline has not (or spans added since), without waiting for it
    to go quiet: ``hotspan import`` calls this once its files are stored, so the derived tables are complete
    when it returns. Runs the processors ``hotspan serve`` runs (``hotspan.app.trace_processors``).

    Raises:
        analysis.StageRulesError, processors.pipeline.hotspot_rules.HotspotRulesError: a rule file is invalid.
        Exception: what storage raises; the traces analysed before stay recorded.
    """
    # hotspan.app pulls in the web stack, which only the local-store path of an import needs.
    from hotspan.app import open_trace_pipeline, trace_pipeline_config, trace_processors

    pipeline = open_trace_pipeline(storage, trace_pipeline_config(settings), trace_processors(storage))
    return pipeline.run_once(force=True)
