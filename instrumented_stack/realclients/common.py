"""What every driver shares: options, OpenTelemetry set-up, the user request (root span + truth), tools,
prompts, and OpenAI clients whose HTTP goes through the recording transports.

A driver process sets up one global ``TracerProvider`` (``service.name`` ``realclient-<driver>``) exporting
OTLP/HTTP protobuf to ``--otlp-endpoint``, because instrumentation libraries record through the global
provider. Each user request is a SERVER span ``POST /ask`` (the shape a FastAPI-served app gives it) opened
by the driver around the framework's work, so the trace id is known and the request's e2e is measured
around exactly that work. With ``http_spans`` the ``httpx2`` clients are instrumented by
``opentelemetry-instrumentation-httpx`` (``HTTPX2ClientInstrumentor``): one CLIENT span per HTTP attempt,
which also injects ``traceparent``; without, the recording transport injects it, so vLLM's ``llm_request``
always lands under the LLM call when the engine traces.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx2
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind

from instrumented_stack.realclients.transport import AsyncRecordingTransport, RecordingTransport
from instrumented_stack.realclients.truth import TruthRecorder
from instrumented_stack.telemetry import otlp_traces_url

ROOT_SPAN_NAME = "POST /ask"
NODE_DIR = Path(__file__).resolve().parent / "node"
"""The Node drivers' package (``package.json``, its lock file, the scripts; ``node_modules`` installed by
``npm ci``, ignored by git)."""
NPM_PREFIX = "npm:"
SYSTEM_PROMPT = " ".join(
    [
        "You are the support assistant of an online shop that sells outdoor equipment.",
        "Answer in two sentences at most, and only from what the tools return.",
        "Orders ship from the central warehouse within two working days; express orders ship the same day.",
        "Returns are accepted within thirty days when the item is unused and in its original packaging.",
        "Refunds go back to the original payment method within five working days after the return arrives.",
        "Never promise a delivery date that the shipping tool did not give, and never invent an order.",
    ]
    * 4
)
"""A fixed ~300-token instruction block: every call of every request shares it, so the engine's prefix
cache hits from the second call on (``cached_tokens`` > 0)."""

QUESTIONS: tuple[str, ...] = (
    "Where is my order A-1042 and when will it reach Oslo?",
    "Can I still return the tent from order B-77, and how long does the refund take?",
    "My order C-5 has not arrived in Bergen yet, what is going on?",
    "When will order D-900 be delivered to Trondheim?",
)

TOOL_ORDER = "lookup_order"
TOOL_SHIPPING = "shipping_estimate"
TOOL_DESCRIPTIONS = {
    TOOL_ORDER: "Look up an order by its id: status and items.",
    TOOL_SHIPPING: "Estimated delivery days of a shipment to a city.",
}


SIDE_QUESTIONS: tuple[str, ...] = (
    "In one word, which language is the following customer question written in?",
    "In one word, is the following question about an order, a return or a delivery?",
    "In one word, which city, if any, does the following customer question name?",
)
"""Questions the app can ask about the user's question before answering it (``AppSettings.side_questions``);
none needs another's answer. Their lengths differ by a few tokens only, as independent calls of one kind do."""


@dataclass(frozen=True, slots=True)
class AppSettings:
    """How the hand-written agent loop (``chat_loop``) behaves; the defaults are the app the captures record.
    The other settings are the client-side faults of ``realclients.faults`` and their clean counterparts.

    Attributes:
        side_questions: questions from :data:`SIDE_QUESTIONS` (at most three) the app asks the model about
            the user's question before its tool loop, each on its own (no tools offered); their answers go
            into the tool loop's first prompt.
        side_questions_concurrent: ask the side questions at the same time instead of one after another.
        resend_history: before each call the app appends the whole conversation to the transcript it sends,
            instead of only the new messages, so every call re-sends all earlier ones again.
        clock_in_system_prompt: the system prompt starts with the current time (to the microsecond),
            taken anew for each call, so no two calls share a prompt prefix.
        system_prompt_repeats: the instruction block repeated this many times (a longer system prompt: 3
            makes every call's prompt over 1,024 tokens, the size hosted providers cache).
        repeat_tool_calls: every tool call the model asks for is run twice with the same arguments (a
            missing memo), the second result is the one sent back.
        conversation: the user requests are turns of one conversation: each turn's prompt carries the earlier
            turns' questions and answers (:attr:`DriverRun.history`), and the driver names the conversation
            (:attr:`DriverRun.conversation_id`) through its library's session API.
    """

    side_questions: int = 0
    side_questions_concurrent: bool = False
    resend_history: bool = False
    clock_in_system_prompt: bool = False
    system_prompt_repeats: int = 1
    repeat_tool_calls: bool = False
    conversation: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.side_questions <= len(SIDE_QUESTIONS):
            raise ValueError(f"side_questions must be 0..{len(SIDE_QUESTIONS)}, got {self.side_questions}")
        if self.system_prompt_repeats < 1:
            raise ValueError(f"system_prompt_repeats must be >= 1, got {self.system_prompt_repeats}")

    def system_prompt(self) -> str:
        """The system prompt of one call (with the clock, a new one each time)."""
        prompt = " ".join([SYSTEM_PROMPT] * self.system_prompt_repeats)
        if self.clock_in_system_prompt:
            return f"Current time: {datetime.now(UTC).isoformat(timespec='microseconds')}. {prompt}"
        return prompt

    def command_line(self) -> list[str]:
        """The settings that differ from the defaults as driver command-line options (``--side-questions 3``,
        ``--resend-history`` ...), read back by :meth:`options`."""
        arguments: list[str] = []
        for item in fields(self):
            value, flag = getattr(self, item.name), "--" + item.name.replace("_", "-")
            if value == item.default:
                continue
            arguments += [flag] if isinstance(value, bool) else [flag, str(value)]
        return arguments

    @classmethod
    def options(cls) -> list[tuple[str, dict[str, object]]]:
        """``(flag, argparse keyword arguments)`` per setting, for a command-line parser; the parsed
        namespace's attributes carry the field names."""
        return [
            (
                "--" + item.name.replace("_", "-"),
                {"action": "store_true"} if item.type in (bool, "bool") else {"type": int, "default": item.default},
            )
            for item in fields(cls)
        ]


@dataclass(frozen=True, slots=True)
class DriverOptions:
    """One driver run, as the command line gives it.

    Attributes:
        driver: the driver's name (``realclients.DRIVERS``).
        llm_url: the OpenAI-compatible server's root URL (``/v1`` is appended).
        model: the served model name.
        otlp_endpoint: OTLP/HTTP base URL spans are exported to (``/v1/traces`` appended).
        stream: ask for streamed answers (``stream: true``) where the library supports it.
        requests: user requests to run, one after another.
        engine_spans: whether the server emits vLLM's ``llm_request`` spans (recorded in the truth; the
            server's own setting decides).
        http_spans: instrument the HTTP client (a CLIENT span per attempt).
        tool_s: **seconds** of work per tool call (half sleep, half CPU).
        truth_out: where the ground-truth JSON goes (``None``: not written).
        app: how the hand-written agent loop behaves (drivers that use it only, ``APP_SETTINGS``).
    """

    driver: str
    llm_url: str
    model: str
    otlp_endpoint: str
    stream: bool = False
    requests: int = 2
    engine_spans: bool = True
    http_spans: bool = True
    tool_s: float = 0.05
    truth_out: Path | None = None
    app: AppSettings = field(default_factory=AppSettings)


class DriverRun:
    """The running driver's telemetry, truth recorder and client factories. One per process."""

    def __init__(self, options: DriverOptions, *, export: bool = True) -> None:
        """``export``: add a ``BatchSpanProcessor`` over :attr:`exporter` (a library that installs its own
        span processor with :attr:`exporter`, such as Langfuse, passes ``False``)."""
        self.options = options
        self.recorder = TruthRecorder()
        self.provider = TracerProvider(resource=Resource.create({SERVICE_NAME: self.service_name}))
        self.exporter: SpanExporter = OTLPSpanExporter(endpoint=otlp_traces_url(options.otlp_endpoint))
        if export:
            self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        trace.set_tracer_provider(self.provider)
        self.tracer = trace.get_tracer("instrumented_stack.realclients")
        self.history: list[dict[str, Any]] = []
        """The conversation's earlier turns (user question, final answer) when ``AppSettings.conversation``."""

    @property
    def service_name(self) -> str:
        """``realclient-<driver>``."""
        return f"realclient-{self.options.driver}"

    @property
    def conversation_id(self) -> str:
        """``realclient-<driver>-conversation``: the conversation the driver names when ``AppSettings.conversation``
        is on."""
        return f"{self.service_name}-conversation"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``<llm_url>/v1``)."""
        return self.options.llm_url.rstrip("/") + "/v1"

    def http_client(self, *, inject_context: bool | None = None) -> httpx2.Client:
        """A synchronous ``httpx2`` client through :class:`RecordingTransport` (instrumented with ``http_spans``).
        The transport injects ``traceparent`` when ``inject_context`` says so, by default when ``http_spans`` is
        off (a library that traces and propagates over ``httpx2`` itself, as ddtrace does, passes ``False``)."""
        inject = not self.options.http_spans if inject_context is None else inject_context
        transport = RecordingTransport(self.recorder, inject_context=inject)
        client = httpx2.Client(transport=transport, timeout=60)
        if self.options.http_spans:
            from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

            HTTPX2ClientInstrumentor.instrument_client(client)
        return client

    def async_http_client(self) -> httpx2.AsyncClient:
        """The asynchronous twin of :meth:`http_client`."""
        transport = AsyncRecordingTransport(self.recorder, inject_context=not self.options.http_spans)
        client = httpx2.AsyncClient(transport=transport, timeout=60)
        if self.options.http_spans:
            from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor

            HTTPX2ClientInstrumentor.instrument_client(client)
        return client

    @contextmanager
    def user_request(self, index: int) -> Iterator[str]:
        """One user request: the root SERVER span and its truth; yields the question to ask."""
        attributes = {"http.request.method": "POST", "http.route": "/ask", "app.request.index": index}
        with self.tracer.start_as_current_span(ROOT_SPAN_NAME, kind=SpanKind.SERVER, attributes=attributes) as span:
            trace_id = trace.format_trace_id(span.get_span_context().trace_id)
            with self.recorder.request(trace_id):
                yield QUESTIONS[index % len(QUESTIONS)]
            span.set_attribute("http.response.status_code", 200)

    def run_requests(self, answer: Callable[[str], object]) -> None:
        """Run the driver's user requests one after another, each ``answer(question)`` inside :meth:`user_request`."""
        for index in range(self.options.requests):
            with self.user_request(index) as question:
                answer(question)

    def tool_work(self, name: str, argument: str) -> str:
        """Run tool ``name`` for real: sleep half of ``tool_s``, then burn the CPU for the other half
        (sha256 rounds); recorded as a tool interval. Returns the tool's answer (JSON text)."""
        with self.recorder.tool(name):
            half = self.options.tool_s / 2
            time.sleep(half)
            deadline = time.monotonic() + half
            digest = argument.encode()
            while time.monotonic() < deadline:
                digest = hashlib.sha256(digest).digest()
        if name == TOOL_ORDER:
            return json.dumps({"order": argument, "status": "shipped", "items": ["tent"], "ref": digest.hex()[:8]})
        return json.dumps({"destination": argument, "days": 3})

    def tool_functions(self) -> dict[str, Callable[[str], str]]:
        """The two tools as plain typed functions (tool name -> function running :meth:`tool_work`), for frameworks
        that build a tool's schema from a function's signature (``lookup_order(order_id: str)``,
        ``shipping_estimate(city: str)``)."""

        def lookup_order(order_id: str) -> str:
            return self.tool_work(TOOL_ORDER, order_id)

        def shipping_estimate(city: str) -> str:
            return self.tool_work(TOOL_SHIPPING, city)

        return {TOOL_ORDER: lookup_order, TOOL_SHIPPING: shipping_estimate}

    def finish(self, libraries: tuple[str, ...]) -> dict[str, object]:
        """Flush the spans, write the truth file (when asked) and return its metadata."""
        self.provider.force_flush()
        self.provider.shutdown()
        options = self.options
        meta: dict[str, object] = {
            "driver": options.driver,
            "service_name": self.service_name,
            "libraries": library_versions(libraries),
            "model": options.model,
            "stream": options.stream,
            "engine_spans": options.engine_spans,
            "http_spans": options.http_spans,
            "tool_s": options.tool_s,
        }
        if options.truth_out is not None:
            options.truth_out.parent.mkdir(parents=True, exist_ok=True)
            options.truth_out.write_text(self.recorder.to_json(meta) + "\n", encoding="utf-8")
        return meta


def library_versions(distributions: tuple[str, ...]) -> dict[str, str]:
    """Installed version of each distribution (``"missing"`` when not installed). A name ``npm:<package>`` is an
    npm package of the Node drivers, read from :data:`NODE_DIR`'s ``node_modules``."""
    versions: dict[str, str] = {}
    for name in distributions:
        if name.startswith(NPM_PREFIX):
            versions[name] = _npm_version(name.removeprefix(NPM_PREFIX))
            continue
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def _npm_version(package: str) -> str:
    manifest = NODE_DIR / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return "missing"
