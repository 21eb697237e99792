"""The scheduler model on its own: batching limits, chunked prefill, prefix cache, preemption, KV blocks."""

from __future__ import annotations

import pytest

from instrumented_stack.engine.core import EngineRequest
from instrumented_stack.engine.kv_cache import KvBlockPool, block_hashes
from instrumented_stack.engine.scheduler import Scheduler, SchedulerConfig, SchedulerConfigError


def _request(name: str, prompt: int, output: int, token_ids: list[int] | None = None) -> EngineRequest:
    ids = tuple(token_ids) if token_ids is not None else tuple(range(prompt))
    return EngineRequest(request_id=name, prompt_tokens=prompt, max_tokens=output, prompt_token_ids=ids)


def _add(scheduler: Scheduler, request: EngineRequest, now: float = 0.0):
    hashes = block_hashes(request.prompt_token_ids, scheduler.config.block_size)
    return scheduler.add(request, hashes, now, 0)


def _run(scheduler: Scheduler, steps: int = 10_000) -> list:
    finished = []
    for step in range(steps):
        if not scheduler.has_work:
            break
        plan = scheduler.schedule(float(step))
        assert plan.work, "a step with work pending must schedule something"
        finished += scheduler.complete(plan, step + 0.5).finished
    return finished


def test_block_hashes_chain_full_blocks_only() -> None:
    assert len(block_hashes(list(range(40)), 16)) == 2
    a, b = block_hashes([1] * 16 + [2] * 16, 16), block_hashes([1] * 16 + [3] * 16, 16)
    assert a[0] == b[0] and a[1] != b[1]
    # Same second block after a different first block: a different chained hash.
    assert block_hashes([9] * 16 + [2] * 16, 16)[1] != a[1]


def test_max_num_seqs_bounds_the_batch_and_the_rest_wait() -> None:
    scheduler = Scheduler(SchedulerConfig(max_num_seqs=2, num_gpu_blocks=64))
    for i in range(4):
        _add(scheduler, _request(f"r{i}", 8, 3))
    plan = scheduler.schedule(0.0)
    assert [s.request.request_id for s, _ in plan.work] == ["r0", "r1"]
    assert len(scheduler.waiting) == 2
    assert len(_run(scheduler)) == 4


def test_chunked_prefill_respects_the_token_budget() -> None:
    scheduler = Scheduler(SchedulerConfig(max_num_batched_tokens=100, num_gpu_blocks=64))
    sequence = _add(scheduler, _request("long", 250, 2))
    chunks = []
    while sequence.first_token_s is None:
        plan = scheduler.schedule(0.0)
        chunks.append(plan.prefill_tokens)
        scheduler.complete(plan, 1.0)
    assert chunks == [100, 100, 50], "250 prompt tokens in chunks of at most 100; the last samples token 1"
    assert sequence.num_output == 1


def test_prefix_cache_reuses_full_blocks_and_leaves_one_token_to_compute() -> None:
    scheduler = Scheduler(SchedulerConfig(num_gpu_blocks=64))
    shared = list(range(64))
    _add(scheduler, _request("first", 64, 1, shared))
    _run(scheduler)
    second = _add(scheduler, _request("second", 64 + 8, 1, [*shared, *range(100, 108)]))
    plan = scheduler.schedule(10.0)
    assert (plan.prefix_queries, plan.prefix_hits) == (72, 64)
    assert plan.prefill_tokens == 8
    assert second.num_computed == 64
    # An identical prompt: all four blocks cached, but the last block is recomputed to sample a token.
    _run(scheduler)
    _add(scheduler, _request("again", 64, 1, shared))
    assert scheduler.schedule(20.0).prefix_hits == 48


def test_without_prefix_caching_nothing_is_queried_or_hit() -> None:
    scheduler = Scheduler(SchedulerConfig(num_gpu_blocks=64, enable_prefix_caching=False))
    _add(scheduler, _request("first", 64, 1))
    _run(scheduler)
    _add(scheduler, _request("second", 64, 1))
    plan = scheduler.schedule(1.0)
    assert (plan.prefix_queries, plan.prefix_hits, plan.prefill_tokens) == (0, 0, 64)


def test_kv_exhaustion_preempts_the_latest_request_which_recomputes_later() -> None:
    # 6 blocks of 16 tokens; two requests of 40 prompt tokens (3 blocks each) that grow while decoding.
    scheduler = Scheduler(SchedulerConfig(num_gpu_blocks=6, block_size=16))
    first = _add(scheduler, _request("first", 40, 20))
    second = _add(scheduler, _request("second", 40, 20))
    preempted = 0
    finished = []
    for step in range(500):
        if not scheduler.has_work:
            break
        plan = scheduler.schedule(float(step))
        preempted += plan.preempted
        finished += scheduler.complete(plan, step + 0.5).finished
    assert preempted >= 1
    assert {s.request.request_id for s in finished} == {"first", "second"}
    assert first.num_output == second.num_output == 20
    assert scheduler.pool.num_free_blocks == 6


def test_usage_counts_held_blocks_and_requests_larger_than_the_cache_are_refused() -> None:
    scheduler = Scheduler(SchedulerConfig(num_gpu_blocks=4, block_size=16))
    _add(scheduler, _request("a", 32, 1))
    scheduler.schedule(0.0)
    assert scheduler.pool.usage == pytest.approx(0.5)
    with pytest.raises(SchedulerConfigError, match="KV tokens"):
        _add(scheduler, _request("huge", 60, 10))


def test_freed_cached_blocks_are_evicted_tail_first() -> None:
    pool = KvBlockPool(num_blocks=3, block_size=1)
    blocks = pool.take((), 3)
    for block, block_hash in zip(blocks, (11, 12, 13), strict=True):
        pool.cache(block, block_hash)
    pool.release(blocks)
    (fresh,) = pool.take((), 1)
    assert fresh == blocks[2], "the prompt's last block is evicted first"
    assert pool.lookup_prefix([11, 12, 13]) == blocks[:2]


def test_without_chunked_prefill_a_prompt_waits_for_a_step_it_fits_whole() -> None:
    scheduler = Scheduler(SchedulerConfig(max_num_batched_tokens=100, num_gpu_blocks=64, enable_chunked_prefill=False))
    for offset, (name, prompt) in enumerate((("a", 60), ("long", 90), ("b", 30))):
        # Prompts share no prefix, so every prompt token is computed.
        _add(scheduler, _request(name, prompt, 2, [1000 * offset + i for i in range(prompt)]))
    plan = scheduler.schedule(0.0)
    # "long" does not fit the 40 tokens left after "a": it keeps its place while "b" (30) goes ahead.
    assert [(s.request.request_id, n) for s, n in plan.work] == [("a", 60), ("b", 30)]
    assert [s.request.request_id for s in scheduler.waiting] == ["long"]
    scheduler.complete(plan, 0.5)
    second = scheduler.schedule(1.0)
    assert ("long", 90) in [(s.request.request_id, n) for s, n in second.work]
    finished = scheduler.complete(second, 1.5).finished
    assert {s.request.request_id for s in finished} == {"a", "b"}
    assert [s.request.request_id for s in _run(scheduler)] == ["long"] and not scheduler.has_work


def test_chunked_prefill_off_needs_a_budget_for_the_longest_prompt() -> None:
    from instrumented_stack.engine import EngineConfig

    with pytest.raises(ValueError, match="without chunked prefill"):
        EngineConfig(max_model_len=8192, scheduler=SchedulerConfig(enable_chunked_prefill=False))
    EngineConfig(
        max_model_len=8192, scheduler=SchedulerConfig(enable_chunked_prefill=False, max_num_batched_tokens=8192)
    )
