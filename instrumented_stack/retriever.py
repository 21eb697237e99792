"""The retriever service: embed the query, search the shipped corpus, return the top-K documents.

``POST /v1/retrieve`` ``{"query": str, "top_k": int}`` -> ``{"documents": [{"id", "title", "text", "sku",
"score"}]}``. Inside the FastAPI SERVER span it records (GenAI semconv, ``gen-ai-spans.md`` retrievals and
``client-embeddings.md``):

- ``retrieval corpus`` (INTERNAL): ``gen_ai.operation.name=retrieval``, ``gen_ai.data_source.id``,
  ``gen_ai.retrieval.top_k`` (the semconv name) and ``retrieval.top_k`` (the plain name analysers also
  look for), ``retrieval.documents`` returned;
  - ``embeddings {model}`` (INTERNAL): ``gen_ai.operation.name=embeddings``, ``gen_ai.request.model``,
    ``gen_ai.embeddings.dimension.count``, ``gen_ai.usage.input_tokens`` (words embedded);
  - ``vector_search corpus`` (INTERNAL): ``retrieval.index_size``, ``retrieval.top_k``;
  - ``deserialize`` (INTERNAL): ``retrieval.documents``, ``deserialize.bytes``, ``deserialize.format``.

Deserialization has two modes (``RetrieverConfig.deserialize``): ``cached`` hands out records decoded once at
start-up; ``json`` parses each hit's stored payload - a JSON record that includes its embedding vector, as
vector stores return them - and validates it, per request. The second is the slow path of the
``retrieval_topk_blowup`` fault.

Errors: 422 for an invalid body.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Request
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, Tracer
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.corpus import Document, load_documents
from instrumented_stack.embedding import EMBEDDER_NAME, HashingEmbedder, VectorIndex, words
from instrumented_stack.semconv import (
    GEN_AI_DATA_SOURCE_ID,
    GEN_AI_EMBEDDINGS_DIMENSION_COUNT,
    GEN_AI_OPERATION_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RETRIEVAL_TOP_K,
    GEN_AI_USAGE_INPUT_TOKENS,
    RETRIEVAL_DOCUMENTS,
    RETRIEVAL_INDEX_SIZE,
    RETRIEVAL_TOP_K,
)
from instrumented_stack.telemetry import build_tracer_provider, instrument_fastapi_app

DATA_SOURCE_ID = "corpus"

DeserializeMode = Literal["cached", "json"]


class RetrieverConfig(BaseModel):
    """Settings of the retriever service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    service_name: str = Field(default="retriever", description="OTel service.name")
    deserialize: DeserializeMode = Field(
        default="cached", description="cached: records decoded at start; json: parse stored payloads per hit"
    )
    max_top_k: int = Field(default=1000, ge=1, description="largest top_k accepted")


class RetrieveRequest(BaseModel):
    """``POST /v1/retrieve`` body."""

    query: str = Field(min_length=1)
    top_k: int = Field(default=4, ge=1, description="documents to return")


class RetrievedDocument(BaseModel):
    """One hit; ``score`` is the cosine similarity (-1..1)."""

    id: str
    title: str
    text: str
    sku: str | None = None
    score: float


class StoredRecord(BaseModel):
    """A stored payload as the ``json`` mode decodes it (vector included, then dropped)."""

    id: str
    title: str
    text: str
    sku: str | None = None
    vector: list[float]


class RetrieveResponse(BaseModel):
    documents: list[RetrievedDocument]


class Retriever:
    """The corpus index and the per-request work. Built once; read-only afterwards (thread-safe)."""

    def __init__(self, config: RetrieverConfig, tracer: Tracer, documents: tuple[Document, ...]) -> None:
        self._config = config
        self._tracer = tracer
        self._documents = documents
        self._embedder = HashingEmbedder()
        vectors = self._embedder.embed_many([f"{doc.title} {doc.text}" for doc in documents])
        self._index = VectorIndex(vectors)
        self._payloads = [
            json.dumps({"id": d.id, "title": d.title, "text": d.text, "sku": d.sku, "vector": v.tolist()}).encode()
            for d, v in zip(documents, vectors, strict=True)
        ]

    def retrieve(self, query: str, top_k: int) -> list[RetrievedDocument]:
        """The ``top_k`` best documents for ``query`` (fewer when the corpus is smaller), best first."""
        with self._tracer.start_as_current_span(
            f"retrieval {DATA_SOURCE_ID}",
            kind=SpanKind.INTERNAL,
            attributes={
                GEN_AI_OPERATION_NAME: "retrieval",
                GEN_AI_DATA_SOURCE_ID: DATA_SOURCE_ID,
                GEN_AI_RETRIEVAL_TOP_K: top_k,
                RETRIEVAL_TOP_K: top_k,
            },
        ) as span:
            with self._tracer.start_as_current_span(
                f"embeddings {EMBEDDER_NAME}",
                kind=SpanKind.INTERNAL,
                attributes={
                    GEN_AI_OPERATION_NAME: "embeddings",
                    GEN_AI_REQUEST_MODEL: EMBEDDER_NAME,
                    GEN_AI_EMBEDDINGS_DIMENSION_COUNT: self._embedder.dimension,
                    GEN_AI_USAGE_INPUT_TOKENS: len(words(query)),
                },
            ):
                vector = self._embedder.embed(query)
            with self._tracer.start_as_current_span(
                f"vector_search {DATA_SOURCE_ID}",
                kind=SpanKind.INTERNAL,
                attributes={RETRIEVAL_INDEX_SIZE: len(self._index), RETRIEVAL_TOP_K: top_k},
            ):
                hits = self._index.search(vector, top_k)
            documents = self._deserialize(hits)
            span.set_attribute(RETRIEVAL_DOCUMENTS, len(documents))
            return documents

    def _deserialize(self, hits: list[tuple[int, float]]) -> list[RetrievedDocument]:
        mode = self._config.deserialize
        with self._tracer.start_as_current_span("deserialize", kind=SpanKind.INTERNAL) as span:
            if mode == "json":
                payloads = [self._payloads[row] for row, _ in hits]
                records = [StoredRecord.model_validate(json.loads(payload)) for payload in payloads]
                size = sum(len(payload) for payload in payloads)
                documents = [
                    RetrievedDocument(id=r.id, title=r.title, text=r.text, sku=r.sku, score=score)
                    for r, (_, score) in zip(records, hits, strict=True)
                ]
            else:
                documents = [
                    RetrievedDocument(id=d.id, title=d.title, text=d.text, sku=d.sku, score=score)
                    for d, score in ((self._documents[row], score) for row, score in hits)
                ]
                size = 0
            span.set_attributes(
                {RETRIEVAL_DOCUMENTS: len(documents), "deserialize.bytes": size, "deserialize.format": mode}
            )
            return documents


def create_retriever_app(config: RetrieverConfig, span_processor: SpanProcessor) -> FastAPI:
    """The retriever as a FastAPI app; ``span_processor`` is shut down with the app's lifespan."""
    provider = build_tracer_provider(config.service_name, span_processor)
    retriever = Retriever(config, provider.get_tracer(__name__), load_documents())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: retriever", lifespan=lifespan)
    instrument_fastapi_app(app, provider)

    @app.post(
        "/v1/retrieve",
        operation_id="retrieve",
        description="Top-K documents of the shipped corpus for a query (cosine of hashing embeddings). "
        "top_k above max_top_k is clamped.",
    )
    async def retrieve(body: RetrieveRequest, request: Request) -> RetrieveResponse:
        top_k = min(body.top_k, config.max_top_k)
        return RetrieveResponse(documents=retriever.retrieve(body.query, top_k))

    return app
