"""A hand-written agent loop over the Anthropic Python SDK's Messages API, as applications without a framework
write one.

The model is offered the two tools as Messages API tools; while it answers with ``tool_use`` blocks the app runs
each (inside a tool span of the instrumentation's convention, which the caller names: the SDK instrumentations
trace the API calls only) and sends the results back as ``tool_result`` blocks; it stops at the first text
answer: three calls per request against the emulator (``engine.tool_calls``). Streaming uses
``client.messages.stream`` and its final message.
"""

from __future__ import annotations

import json
from typing import Any

from instrumented_stack.realclients.chat_loop import MAX_LLM_CALLS, ToolSpanShape
from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, TOOL_ORDER, TOOL_SHIPPING, DriverRun

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


def run_messages_requests(run: DriverRun, tool_span_shape: ToolSpanShape, *, sdk_traces: bool) -> None:
    """Run the driver's user requests on one ``anthropic.Anthropic`` client (created after the caller instrumented
    the SDK) whose HTTP goes through the run's recording transport. ``sdk_traces``: keep the SDK's own spans (on by
    default in ``anthropic`` >= 2.16; a driver showing another instrumentation turns them off so each call has one
    LLM span). Tool runs are INTERNAL spans of the driver's tracer, named and attributed by ``tool_span_shape``."""
    import anthropic

    client = anthropic.Anthropic(
        base_url=run.options.llm_url,
        api_key="unused",
        http_client=run.http_client(),
        open_telemetry={"tracer_provider": run.provider, "traces": sdk_traces},
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
                span_name, attributes = tool_span_shape(use.name, use.id, json.dumps(use.input))
                with run.tracer.start_as_current_span(span_name, attributes=attributes):
                    content = run.tool_work(use.name, argument)
                results.append({"type": "tool_result", "tool_use_id": use.id, "content": content})
            messages.append({"role": "user", "content": results})
        raise RuntimeError(f"no text answer after {MAX_LLM_CALLS} LLM calls")

    run.run_requests(answer)
