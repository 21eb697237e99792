"""Hand-built requests that only client-side instrumentation recorded (no engine span, no metric), for the tests
of the client-side rules.

A request is a SERVER root ``POST /ask`` of service ``app`` around a sequence of steps, in the GenAI semantic
conventions' spelling: a model call is a CLIENT span ``chat <model>`` (``gen_ai.operation.name=chat``, model,
provider, usage, optionally ``gen_ai.response.time_to_first_chunk``, cached tokens, captured input and output, a
conversation id) with one HTTP CLIENT span per attempt below it (``url.full`` of the chat completions route,
``http.response.status_code``); a tool call is an INTERNAL ``execute_tool <name>`` span with
``gen_ai.tool.call.arguments``. Steps run one after another, ``gap_ms`` apart; :class:`Together` runs its calls
at once. Durations are in ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from diagnosis_support import T0, SpanSpec, ms, trace_id

MODEL = "gpt-4o-mini"
URL = "https://api.example.com/v1/chat/completions"


@dataclass(frozen=True)
class Call:
    """One model call. ``attempts``: the HTTP status of each attempt in order (each refused one takes 5 ms,
    then the client waits ``retry_wait_ms``); ``None`` records no HTTP span (the call span then carries the
    last status as ``error.type`` when it is an error)."""

    input_tokens: int | None = 600
    output_tokens: int | None = 20
    cached_tokens: int | None = None
    duration_ms: float = 200.0
    ttft_ms: float | None = None
    content: str | None = None
    answer: str | None = None
    conversation: str | None = None
    attempts: tuple[int, ...] | None = (200,)
    retry_wait_ms: float = 50.0
    retry_after: str | None = None
    status: str = "Unset"
    model: str = MODEL


@dataclass(frozen=True)
class Tool:
    """One tool call; ``arguments`` ``None``: not captured."""

    name: str = "lookup_order"
    arguments: str | None = '{"order_id":"A-1"}'
    duration_ms: float = 50.0
    status: str = "Unset"


@dataclass(frozen=True)
class Together:
    """Model calls issued at the same time; the step lasts as long as the longest."""

    calls: tuple[Call, ...]


Step = Call | Tool | Together


@dataclass(frozen=True)
class ClientRequest:
    """One user request: its steps, when it starts (ms after :data:`T0`) and the pause between steps."""

    trace: int
    steps: Sequence[Step] = field(default_factory=tuple)
    start_ms: float = 0.0
    gap_ms: float = 5.0


def build(request: ClientRequest) -> list[SpanSpec]:
    """The spans of ``request``."""
    tid = trace_id(request.trace)
    spans: list[SpanSpec] = []
    counter = iter(range(1, 10_000))

    def new_id() -> str:
        return f"{next(counter):016x}"

    root = new_id()
    start = T0 + ms(request.start_ms)
    now = start
    for step in request.steps:
        now += ms(request.gap_ms)
        if isinstance(step, Tool):
            arguments = {} if step.arguments is None else {"gen_ai.tool.call.arguments": step.arguments}
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": step.name, **arguments}
            end = now + ms(step.duration_ms)
            spans.append(
                SpanSpec(
                    tid,
                    new_id(),
                    root,
                    f"execute_tool {step.name}",
                    "app",
                    "Internal",
                    now,
                    end,
                    attributes,
                    status=step.status,
                )
            )
            now = end
            continue
        calls = step.calls if isinstance(step, Together) else (step,)
        now = max(_call(spans, tid, root, new_id, call, now) for call in calls)
    end = now + ms(request.gap_ms)
    spans.append(SpanSpec(tid, root, "", "POST /ask", "app", "Server", start, end, {"http.route": "/ask"}))
    return spans


def _call(spans: list[SpanSpec], tid: str, root: str, new_id: Callable[[], str], call: Call, start: int) -> int:
    """Lay out one model call and its attempts from ``start``; returns its end."""
    end = start + ms(call.duration_ms)
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": call.model,
    }
    optional = {
        "gen_ai.usage.input_tokens": call.input_tokens,
        "gen_ai.usage.output_tokens": call.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": call.cached_tokens,
        "gen_ai.response.time_to_first_chunk": None if call.ttft_ms is None else call.ttft_ms / 1e3,
        "gen_ai.input.messages": call.content,
        "gen_ai.output.messages": call.answer,
        "gen_ai.conversation.id": call.conversation,
    }
    attributes.update({key: str(value) for key, value in optional.items() if value is not None})
    if call.attempts is None and call.status == "Error":
        attributes["error.type"] = "429"
    span_id = new_id()
    spans.append(
        SpanSpec(tid, span_id, root, f"chat {call.model}", "app", "Client", start, end, attributes, status=call.status)
    )
    at = start + ms(1.0)
    for number, status in enumerate(call.attempts or ()):
        last = number == len(call.attempts or ()) - 1
        attempt_end = end - ms(1.0) if last else at + ms(5.0)
        http = {"http.request.method": "POST", "url.full": URL, "http.response.status_code": str(status)}
        if status >= 400 and call.retry_after is not None:
            http["http.response.header.retry-after"] = call.retry_after
        spans.append(
            SpanSpec(
                tid,
                new_id(),
                span_id,
                "POST",
                "app",
                "Client",
                at,
                attempt_end,
                http,
                status="Error" if status >= 400 else "Unset",
            )
        )
        at = attempt_end + ms(call.retry_wait_ms)
    return end


def build_all(requests: Iterable[ClientRequest]) -> list[SpanSpec]:
    """The spans of every request."""
    return [span for request in requests for span in build(request)]


def repeat(count: int, steps: Sequence[Step], spacing_ms: float = 5_000.0) -> list[SpanSpec]:
    """``count`` requests with the same steps, ``spacing_ms`` apart."""
    return build_all(ClientRequest(trace=i, steps=steps, start_ms=i * spacing_ms) for i in range(count))


def agent_loop(first_input: int = 600, growth: int = 70, calls: int = 3, tool_ms: float = 50.0) -> list[Step]:
    """A healthy tool loop: each call re-sends the history plus the last answer and a tool result (``growth``
    tokens more), a tool runs between calls, answers stay short."""
    steps: list[Step] = []
    for number in range(calls):
        steps.append(Call(input_tokens=first_input + number * growth, output_tokens=18))
        if number < calls - 1:
            steps.append(Tool(name=f"tool_{number}", arguments=f'{{"n":{number}}}', duration_ms=tool_ms))
    return steps
