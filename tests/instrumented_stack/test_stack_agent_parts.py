"""The agent's parts on their own: tokenizer, prompts, routing and planning, tools, retrieval, tool validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.trace import NoOpTracer

from instrumented_stack.corpus import load_catalogue, load_documents
from instrumented_stack.embedding import HashingEmbedder, VectorIndex
from instrumented_stack.planning import PlanState, next_action, route
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.tokenizer import BpeTokenizer, default_tokenizer, tokenizer_file
from instrumented_stack.tokenizer_workers import TokenizerWorkers
from instrumented_stack.tool_selection import ToolSelector, UnknownToolError
from instrumented_stack.tools import CALCULATOR, CATALOGUE_LOOKUP, ToolError, calculate, tool_definitions
from instrumented_stack.workload import WorkloadRequest, load_mooncake_trace


def test_tokenizer_is_trained_once_and_cached(tmp_path: Path) -> None:
    path = tokenizer_file(tmp_path)
    assert path.parent == tmp_path and path.name.startswith("tokenizer-")
    mtime = path.stat().st_mtime_ns
    assert tokenizer_file(tmp_path) == path and path.stat().st_mtime_ns == mtime
    tokenizer = BpeTokenizer.from_file(path)
    assert tokenizer.vocab_size > 500
    assert tokenizer.count("How long does a refund take to arrive ?") > 5


def test_synthesized_text_has_the_exact_token_count_and_is_prefix_stable() -> None:
    tokenizer = default_tokenizer()
    for count in (0, 1, 17, 512, 3000):
        assert tokenizer.count(tokenizer.synthesize(count, seed=count)) == count
    assert tokenizer.synthesize(600, seed=9).startswith(tokenizer.synthesize(100, seed=9))
    with pytest.raises(ValueError):
        tokenizer.synthesize(-1)


def test_prompts_have_the_row_token_count_and_mooncake_rows_share_prefixes() -> None:
    tokenizer = default_tokenizer()
    builder = PromptBuilder(tokenizer, seed=1)
    row = WorkloadRequest(index=5, arrival_offset_s=0.0, prompt_tokens=900, output_tokens=10)
    prompt = builder.build(row)
    assert tokenizer.count(prompt.prompt) == 900
    assert route(prompt.prompt) == prompt.intent
    assert builder.build(row) == prompt, "same seed, same prompt"
    first, second = (builder.build(r) for r in load_mooncake_trace(limit=2))
    assert tokenizer.count(first.prompt) == first.row.prompt_tokens
    shared = tokenizer.synthesize(512, seed=0)
    assert first.prompt.startswith(shared) and second.prompt.startswith(shared)
    assert first.prompt[: len(shared) + 200] != second.prompt[: len(shared) + 200]


def test_routing_and_the_planning_loop() -> None:
    assert route("history words\nWhat is the price of SKU-0042 ?") == "catalogue"
    assert route("price in the history\nHow long does a refund take ?") == "policy"
    assert route("Please calculate ( 2 + 3 ) * 4") == "calculate"
    assert route("Tell me more about that .") == "chat"
    state = PlanState(intent="catalogue", question="Is the Acme red kettle in stock ?")
    assert next_action(state, 4).kind == "retrieve"
    state.documents = [{"sku": None}, {"sku": "SKU-0007"}]
    action = next_action(state, 3)
    assert (action.tool, action.arguments) == (CATALOGUE_LOOKUP, {"sku": "SKU-0007"})
    state.tool_results[CATALOGUE_LOOKUP] = {"price_eur": 1.0}
    assert next_action(state, 2).kind == "answer"
    calc = PlanState(intent="calculate", question="Please calculate ( 2 + 3 ) * 4")
    assert next_action(calc, 3).arguments == {"expression": "( 2 + 3 ) * 4"}
    assert next_action(calc, 1).kind == "answer", "the last step always answers"


def test_calculator_and_tool_schemas() -> None:
    assert calculate("( 2 + 3 ) * 4") == 20
    for bad in ("__import__('os')", "1 / 0", "2 ** 1000"):
        with pytest.raises(ToolError):
            calculate(bad)
    selector = ToolSelector(tool_definitions(), "cached", NoOpTracer())
    assert selector.validate(CALCULATOR, {"expression": "1 + 1"}) == []
    assert selector.validate(CATALOGUE_LOOKUP, {"sku": "kettle"})
    slow = ToolSelector(tool_definitions(), "per_call", NoOpTracer())
    assert slow.validate(CATALOGUE_LOOKUP, {"sku": "SKU-0001", "extra": 1}) == selector.validate(
        CATALOGUE_LOOKUP, {"sku": "SKU-0001", "extra": 1}
    )
    with pytest.raises(UnknownToolError):
        selector.validate("weather", {})


def test_retrieval_finds_the_named_product_and_policy() -> None:
    documents = load_documents()
    embedder = HashingEmbedder()
    index = VectorIndex(embedder.embed_many([f"{d.title} {d.text}" for d in documents]))
    product = load_catalogue()[41]
    best, _ = index.search(embedder.embed(f"Is the {product.name} in stock ?"), 1)[0]
    assert documents[best].sku == product.sku
    hits = index.search(embedder.embed("How long does a refund take to arrive ?"), 3)
    assert "refund-timing" in {documents[row].id for row, _ in hits}
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert len(index.search(embedder.embed("x"), 10_000)) == len(documents)


def test_tokenizer_workers_load_lazily_and_recycle() -> None:
    path = tokenizer_file()
    warm = TokenizerWorkers(path, workers=2)
    assert [warm.lease().loaded for _ in range(5)] == [True, True, False, False, False]
    cold = TokenizerWorkers(path, workers=2, max_requests_per_worker=1)
    assert all(cold.lease().loaded for _ in range(4))
