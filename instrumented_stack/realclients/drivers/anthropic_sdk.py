"""The Anthropic Python SDK's built-in OpenTelemetry tracing, a tool loop over the Messages API.

The SDK (``anthropic`` >= 2.16, module ``anthropic._tracing``) writes one CLIENT span per API call, retries and
the reading of a returned stream included, and sends that span's trace context with each HTTP attempt; it is on
by default and records through the provider given as ``open_telemetry={"tracer_provider": ...}``. The app is the
loop applications without a framework write: the model is offered the two tools as Messages API tools; while it
answers with ``tool_use`` blocks the app runs each (inside a GenAI ``execute_tool`` span of its own: the SDK traces
the API calls only) and sends the results back as ``tool_result`` blocks; it stops at the first text answer (three
calls per request against the emulator). Streaming uses ``client.messages.stream`` and its final message.
"""

from __future__ import annotations

from typing import Any

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, TOOL_ORDER, TOOL_SHIPPING, DriverRun

LIBRARIES = ("anthropic", "opentelemetry-instrumentation-httpx")
MAX_LLM_CALLS = 6
MAX_TOKENS = 256
TOOLS: list[dict[str, Any]] = [
    {
        "name": TOOL_ORDER,
        "description": TOOL_DESCRIPTIONS[TOOL_ORDER],
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
    {
        "name": TOOL_SHIPPING,
        "description": TOOL_DESCRIPTIONS[TOOL_SHIPPING],
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
]


def run(run: DriverRun) -> None:
    import anthropic

    client = anthropic.Anthropic(
        base_url=run.options.llm_url,
        api_key="unused",
        http_client=run.http_client(),
        open_telemetry={"tracer_provider": run.provider},
    )

    def answer(question: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        for _ in range(MAX_LLM_CALLS):
            request = {"model": run.options.model, "max_tokens": MAX_TOKENS, "system": SYSTEM_PROMPT}
            request |= {"tools": TOOLS, "messages": messages}
            if run.options.stream:
                with client.messages.stream(**request) as stream:
                    message = stream.get_final_message()
            else:
                message = client.messages.create(**request)
            uses = [block for block in message.content if block.type == "tool_use"]
            if not uses:
                return "".join(block.text for block in message.content if block.type == "text")
            messages.append({"role": "assistant", "content": [block.model_dump() for block in message.content]})
            results = []
            for use in uses:
                argument = str(next(iter(use.input.values()), "")) if isinstance(use.input, dict) else ""
                attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": use.name}
                with run.tracer.start_as_current_span(f"execute_tool {use.name}", attributes=attributes):
                    content = run.tool_work(use.name, argument)
                results.append({"type": "tool_result", "tool_use_id": use.id, "content": content})
            messages.append({"role": "user", "content": results})
        raise RuntimeError(f"no text answer after {MAX_LLM_CALLS} LLM calls")

    run.run_requests(answer)
