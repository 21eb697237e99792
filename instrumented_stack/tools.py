"""The tool service: a calculator and a catalogue lookup, with JSON-schema tool definitions.

Routes:

- ``GET /v1/tools`` -> ``{"tools": [{"name", "description", "parameters"}]}``: each tool's arguments as a
  JSON Schema (draft 2020-12), the shape OpenAI-style tool definitions use; the agent validates its tool
  arguments against these.
- ``POST /v1/tools/{name}`` with the arguments object -> ``{"result": ...}``.

Inside the FastAPI SERVER span each call records ``tool {name}`` (INTERNAL, ``gen_ai.tool.name``). The
catalogue lookup waits ``lookup_latency_s`` (**seconds**), standing in for its database round trip; with
``lookup_attachment_bytes`` it also returns the product's attachments (``attachments``, that many bytes of base64
image data beside ``result``, which the agent never reads), uncompressed: the whole record a lookup that
selects every column sends.

Errors: 404 unknown tool, 422 arguments that do not match the tool (``{"error": {...}}``).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import operator
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import SpanProcessor
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.corpus import load_catalogue
from instrumented_stack.semconv import GEN_AI_TOOL_NAME
from instrumented_stack.telemetry import build_tracer_provider, instrument_fastapi_app

CALCULATOR = "calculator"
CATALOGUE_LOOKUP = "catalogue_lookup"

SKU_PATTERN = r"^SKU-[0-9]{4}$"


def tool_definitions() -> list[dict[str, Any]]:
    """The tools' names, descriptions and JSON-Schema parameters."""
    return [
        {
            "name": CALCULATOR,
            "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
            "parameters": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["expression"],
                "additionalProperties": False,
            },
        },
        {
            "name": CATALOGUE_LOOKUP,
            "description": "Price, stock and description of a catalogue product by SKU.",
            "parameters": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": SKU_PATTERN},
                    "fields": {
                        "type": "array",
                        "items": {"enum": ["name", "price_eur", "stock", "description", "category"]},
                        "uniqueItems": True,
                    },
                },
                "required": ["sku"],
                "additionalProperties": False,
            },
        },
    ]


class ToolError(Exception):
    """A tool call that cannot be served; becomes ``status`` with ``{"error": {...}}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_OPERATORS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def calculate(expression: str) -> float:
    """Evaluate ``expression`` (numbers, + - * / **, parentheses) without ``eval``.

    Raises:
        ToolError: 422 for anything else, a division by zero, or an exponent above 100.
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ToolError(422, f"not an arithmetic expression: {expression!r}") from error

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ToolError(422, "exponent above 100")
            if isinstance(node.op, ast.Div) and right == 0:
                raise ToolError(422, "division by zero")
            return _OPERATORS[type(node.op)](left, right)
        raise ToolError(422, f"unsupported element {type(node).__name__} in {expression!r}")

    return value(tree.body)


class ToolsConfig(BaseModel):
    """Settings of the tool service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    service_name: str = Field(default="tools", description="OTel service.name")
    lookup_latency_s: float = Field(default=0.002, ge=0, description="catalogue lookup latency in seconds")
    lookup_attachment_bytes: int = Field(
        default=0, ge=0, description="bytes of base64 attachments each catalogue lookup returns; 0: none"
    )


class ToolResult(BaseModel):
    result: Any
    attachments: str | None = None


def attachment_blob(size: int) -> str | None:
    """``size`` bytes of base64 text standing in for a product's images (incompressible, like JPEG data);
    ``None`` for 0."""
    if size == 0:
        return None
    return base64.b64encode(random.Random(size).randbytes(size * 3 // 4 + 3)).decode()[:size]


def create_tools_app(config: ToolsConfig, span_processor: SpanProcessor) -> FastAPI:
    """The tool service as a FastAPI app; ``span_processor`` is shut down with the app's lifespan."""
    provider = build_tracer_provider(config.service_name, span_processor)
    tracer = provider.get_tracer(__name__)
    products = {product.sku: product for product in load_catalogue()}
    attachments = attachment_blob(config.lookup_attachment_bytes)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: tools", lifespan=lifespan)
    instrument_fastapi_app(app, provider)

    @app.exception_handler(ToolError)
    async def on_tool_error(_: Request, error: ToolError) -> JSONResponse:
        return JSONResponse(status_code=error.status, content={"error": {"message": str(error), "type": "tool_error"}})

    @app.get("/v1/tools", operation_id="list_tools", description="Tool names, descriptions and JSON-Schema arguments.")
    async def list_tools() -> dict[str, list[dict[str, Any]]]:
        return {"tools": tool_definitions()}

    @app.post(
        "/v1/tools/{name}",
        operation_id="call_tool",
        description="Run one tool with a JSON object of arguments. 404 unknown tool; 422 bad arguments.",
        responses={404: {"description": "unknown tool"}, 422: {"description": "arguments do not fit the tool"}},
        response_model_exclude_none=True,
    )
    async def call_tool(name: str, arguments: dict[str, Any]) -> ToolResult:
        with tracer.start_as_current_span(f"tool {name}", attributes={GEN_AI_TOOL_NAME: name}):
            if name == CALCULATOR:
                return ToolResult(result=calculate(str(arguments.get("expression", ""))))
            if name == CATALOGUE_LOOKUP:
                product = products.get(str(arguments.get("sku")))
                await asyncio.sleep(config.lookup_latency_s)
                if product is None:
                    raise ToolError(422, f"unknown sku {arguments.get('sku')!r}")
                fields = arguments.get("fields") or ["name", "price_eur", "stock"]
                record = {"sku": product.sku, **{f: getattr(product, f) for f in fields}}
                return ToolResult(result=record, attachments=attachments)
            raise ToolError(404, f"unknown tool {name!r}")

    return app
