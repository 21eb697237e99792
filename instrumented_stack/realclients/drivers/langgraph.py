"""LangGraph + ``langchain-openai`` instrumented by OpenLLMetry's ``opentelemetry-instrumentation-langchain``.

A ReAct-style graph: an ``agent`` node calls ``ChatOpenAI`` with the two tools bound, a ``tools`` node
(LangGraph's ``ToolNode``) runs the calls, and ``tools_condition`` loops until a text answer. OpenLLMetry's
LangChain instrumentation records the workflow, each node/chain as a task, each LLM call and each tool.
``--stream`` makes ``ChatOpenAI`` stream (``streaming=True``, ``stream_usage=True``).
"""

from __future__ import annotations

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, TOOL_ORDER, TOOL_SHIPPING, DriverRun

LIBRARIES = (
    "langgraph",
    "langchain-core",
    "langchain-openai",
    "opentelemetry-instrumentation-langchain",
    "openai",
    "opentelemetry-instrumentation-httpx",
)


def run(run: DriverRun) -> None:
    from langchain_core.messages import SystemMessage
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=run.provider)

    def lookup_order(order_id: str) -> str:
        return run.tool_work(TOOL_ORDER, order_id)

    def shipping_estimate(city: str) -> str:
        return run.tool_work(TOOL_SHIPPING, city)

    tools = [
        StructuredTool.from_function(lookup_order, name=TOOL_ORDER, description=TOOL_DESCRIPTIONS[TOOL_ORDER]),
        StructuredTool.from_function(
            shipping_estimate, name=TOOL_SHIPPING, description=TOOL_DESCRIPTIONS[TOOL_SHIPPING]
        ),
    ]
    llm = ChatOpenAI(
        model=run.options.model,
        base_url=run.base_url,
        api_key="unused",  # type: ignore[arg-type]
        http_client=run.http_client(),
        streaming=run.options.stream,
        stream_usage=True,
    ).bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, list[object]]:
        return {"messages": [llm.invoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile()
    for index in range(run.options.requests):
        with run.user_request(index) as question:
            graph.invoke({"messages": [("user", question)]})
