"""A step-by-step model of vLLM v1's scheduler: continuous batching, chunked prefill, KV blocks, preemption.

Sources (vllm-project/vllm, read for behaviour, not copied): ``vllm/v1/core/sched/scheduler.py``
(``Scheduler.schedule``: running requests first, then waiting ones; token budget; preemption of the last
running request when KV blocks run out; no new admissions in a step that preempted; without chunked prefill, a
waiting request whose prompt exceeds the remaining budget is skipped for the step, keeping its place),
``vllm/v1/request.py`` (``num_computed_tokens``, statuses) and ``vllm/v1/metrics/stats.py`` (what is
counted when).

One engine step is two calls: :meth:`Scheduler.schedule` decides which requests compute how many tokens
(a :class:`StepPlan`), the caller spends the step's time, then :meth:`Scheduler.complete` applies the
result at the step's end time and reports what happened (a :class:`StepOutcome`). Times are monotonic
**seconds** passed in by the caller, so the scheduler itself is deterministic and clock-free.

The unit of work is uniform: a request *knows* ``prompt_tokens + num_output`` tokens and has computed the
KV of ``num_computed`` of them. A step computes up to ``known - num_computed`` of them (all of a prompt
chunk, or the one new token of a decoding request) and, when that completes the known tokens, samples one
more token. A preempted request drops its KV and recomputes prompt and output tokens when it is admitted
again (vLLM v1's recompute preemption); its prompt blocks may still be found in the prefix cache.

Not thread-safe; one owner (the engine core's event loop).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.engine.core import EngineRequest, FinishReason
from instrumented_stack.engine.kv_cache import BlockHash, KvBlockPool

DEFAULT_BLOCK_SIZE = 16
"""vLLM's default KV block size in tokens (``--block-size``)."""


class SchedulerConfig(BaseModel):
    """The scheduler's limits, named after ``vllm serve`` flags."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_num_seqs: int = Field(default=64, ge=1, description="--max-num-seqs: requests running at once")
    max_num_batched_tokens: int = Field(
        default=4096, ge=1, description="--max-num-batched-tokens: tokens computed per step (chunked prefill)"
    )
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=1, description="--block-size: tokens per KV block")
    num_gpu_blocks: int = Field(default=16384, ge=1, description="KV capacity in blocks")
    enable_prefix_caching: bool = Field(default=True, description="--enable-prefix-caching")
    enable_chunked_prefill: bool = Field(
        default=True,
        description="--enable-chunked-prefill: a prompt may be computed over several steps; off, a waiting "
        "request is admitted only when its whole prompt fits the step's remaining token budget",
    )

    @property
    def kv_capacity_tokens(self) -> int:
        """KV capacity in tokens."""
        return self.num_gpu_blocks * self.block_size


class SchedulerConfigError(ValueError):
    """The scheduler cannot serve a request of this size."""


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside the scheduler. Times are monotonic **seconds**; ``None`` until reached."""

    request: EngineRequest
    block_hashes: list[BlockHash]
    arrival_s: float
    arrival_unix_ns: int
    scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    finished_s: float | None = None
    num_computed: int = 0
    num_output: int = 0
    num_cached_blocks: int = 0
    """Leading blocks already registered in the prefix cache (so completion does not re-register them)."""
    cached_tokens: int = 0
    """Prompt tokens found in the prefix cache when first scheduled (vLLM's ``num_cached_tokens``)."""
    blocks: list[int] = field(default_factory=list)
    aborted: bool = False

    @property
    def known_tokens(self) -> int:
        """Prompt tokens plus tokens generated so far."""
        return self.request.prompt_tokens + self.num_output

    @property
    def done(self) -> bool:
        """All the request's ``output_tokens`` generated."""
        return self.num_output >= self.request.output_tokens

    @property
    def finish_reason(self) -> FinishReason:
        """``stop`` when the emulated EOS ended it before ``max_tokens``, else ``length``."""
        return "stop" if self.request.output_tokens < self.request.max_tokens else "length"


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one step computes.

    Attributes:
        work: ``(sequence, tokens to compute)`` pairs, running requests first.
        prefill_tokens: prompt (or recomputed) tokens computed, cache hits excluded.
        decode_seqs: requests computing exactly their one new decode token.
        decode_kv_tokens: KV tokens those decoding requests attend over.
        preempted: requests preempted while planning this step.
        prefix_queries, prefix_hits: prefix-cache lookups of newly admitted requests, in **tokens**
            (vLLM's ``PrefixCacheStats``; both 0 without prefix caching, as vLLM records none then).
    """

    work: tuple[tuple[Sequence, int], ...]
    prefill_tokens: int
    decode_seqs: int
    decode_kv_tokens: int
    preempted: int
    prefix_queries: int
    prefix_hits: int


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a completed step produced.

    Attributes:
        first_token_latencies_s: arrival -> first token, **seconds**, per request that got its first token.
        inter_token_latencies_s: previous token -> this token, **seconds**, per later token.
        prompt_tokens: prompt tokens of the requests that got their first token (counted once per request).
        generation_tokens: tokens sampled in this step.
        finished: requests that generated their last token.
        sampled: requests that sampled a token in this step (finished ones included).
    """

    first_token_latencies_s: tuple[float, ...]
    inter_token_latencies_s: tuple[float, ...]
    prompt_tokens: int
    generation_tokens: int
    finished: tuple[Sequence, ...]
    sampled: tuple[Sequence, ...] = ()


class Scheduler:
    """Waiting and running queues over a :class:`KvBlockPool`; see the module docstring.

    Raises:
        SchedulerConfigError: from :meth:`add`, for a request that could never fit the KV cache.
    """

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.pool = KvBlockPool(
            config.num_gpu_blocks, config.block_size, enable_prefix_caching=config.enable_prefix_caching
        )
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    @property
    def has_work(self) -> bool:
        """Whether any request is waiting or running."""
        return bool(self.waiting or self.running)

    def add(
        self, request: EngineRequest, block_hashes: list[BlockHash], arrival_s: float, arrival_unix_ns: int
    ) -> Sequence:
        """Queue ``request`` (arrived at monotonic ``arrival_s`` **seconds**) and return its sequence."""
        capacity = self.config.kv_capacity_tokens
        if request.prompt_tokens + request.max_tokens > capacity:
            raise SchedulerConfigError(
                f"request needs {request.prompt_tokens + request.max_tokens} KV tokens; the cache holds {capacity}"
            )
        sequence = Sequence(request, block_hashes, arrival_s, arrival_unix_ns)
        self.waiting.append(sequence)
        return sequence

    def abort(self, sequence: Sequence) -> None:
        """Drop ``sequence`` wherever it is and free its blocks. Idempotent."""
        if sequence.aborted or sequence.finished_s is not None:
            return
        sequence.aborted = True
        if sequence in self.running:
            self.running.remove(sequence)
        elif sequence in self.waiting:
            self.waiting.remove(sequence)
        self._free(sequence)

    def schedule(self, now_s: float) -> StepPlan:
        """Plan one step starting at monotonic ``now_s`` **seconds**."""
        budget = self.config.max_num_batched_tokens
        work: list[tuple[Sequence, int]] = []
        preempted = 0
        index = 0
        while index < len(self.running) and budget > 0:
            sequence = self.running[index]
            tokens = min(sequence.known_tokens - sequence.num_computed, budget)
            needed = self.pool.blocks_for(sequence.num_computed + tokens) - len(sequence.blocks)
            while not self.pool.can_allocate((), needed):
                victim = self.running.pop()
                self._preempt(victim)
                preempted += 1
                if victim is sequence:
                    break
            else:
                sequence.blocks.extend(self.pool.take((), needed))
                work.append((sequence, tokens))
                budget -= tokens
                index += 1

        queries = hits = 0
        skipped: list[Sequence] = []
        # vLLM v1 admits nothing new in a step that had to preempt.
        while not preempted and self.waiting and len(self.running) < self.config.max_num_seqs and budget > 0:
            sequence = self.waiting[0]
            cached = self._cached_prefix(sequence)
            cached_tokens = len(cached) * self.config.block_size
            if not self.config.enable_chunked_prefill and sequence.known_tokens - cached_tokens > budget:
                # vLLM v1 without chunked prefill: a prompt that does not fit whole waits, later ones may go first.
                skipped.append(self.waiting.popleft())
                continue
            tokens = min(sequence.known_tokens - cached_tokens, budget)
            needed = self.pool.blocks_for(cached_tokens + tokens) - len(cached)
            if not self.pool.can_allocate(cached, needed):
                break
            self.waiting.popleft()
            sequence.blocks = self.pool.take(cached, needed)
            sequence.num_computed = cached_tokens
            sequence.num_cached_blocks = len(cached)
            if sequence.scheduled_s is None:
                sequence.scheduled_s = now_s
                sequence.cached_tokens = cached_tokens
            if self.config.enable_prefix_caching:
                queries += sequence.known_tokens
                hits += cached_tokens
            self.running.append(sequence)
            work.append((sequence, tokens))
            budget -= tokens
        self.waiting.extendleft(reversed(skipped))

        decoding = [(s, n) for s, n in work if n == 1 and s.num_output > 0 and s.known_tokens - s.num_computed == 1]
        decode_ids = {id(s) for s, _ in decoding}
        return StepPlan(
            work=tuple(work),
            prefill_tokens=sum(n for s, n in work if id(s) not in decode_ids),
            decode_seqs=len(decoding),
            decode_kv_tokens=sum(s.num_computed for s, _ in decoding),
            preempted=preempted,
            prefix_queries=queries,
            prefix_hits=hits,
        )

    def complete(self, plan: StepPlan, now_s: float) -> StepOutcome:
        """Apply ``plan``'s computation at monotonic ``now_s`` **seconds** (the step's end)."""
        ttfts: list[float] = []
        itls: list[float] = []
        prompt_tokens = generated = 0
        finished: list[Sequence] = []
        sampled: list[Sequence] = []
        for sequence, tokens in plan.work:
            if sequence.aborted:
                continue
            sequence.num_computed += tokens
            self._register_full_prompt_blocks(sequence)
            if sequence.num_computed < sequence.known_tokens:
                continue
            sequence.num_output += 1
            generated += 1
            sampled.append(sequence)
            if sequence.first_token_s is None:
                sequence.first_token_s = now_s
                ttfts.append(now_s - sequence.arrival_s)
                prompt_tokens += sequence.request.prompt_tokens
            elif sequence.last_token_s is not None:
                itls.append(now_s - sequence.last_token_s)
            sequence.last_token_s = now_s
            if sequence.done:
                sequence.finished_s = now_s
                self.running.remove(sequence)
                self._free(sequence)
                finished.append(sequence)
        return StepOutcome(tuple(ttfts), tuple(itls), prompt_tokens, generated, tuple(finished), tuple(sampled))

    def _cached_prefix(self, sequence: Sequence) -> list[int]:
        """Cached leading blocks of ``sequence``'s prompt, leaving at least one token to compute (as vLLM)."""
        cached = self.pool.lookup_prefix(sequence.block_hashes)
        return cached[: (sequence.known_tokens - 1) // self.config.block_size]

    def _register_full_prompt_blocks(self, sequence: Sequence) -> None:
        full = min(sequence.num_computed, sequence.request.prompt_tokens) // self.config.block_size
        for index in range(sequence.num_cached_blocks, min(full, len(sequence.block_hashes))):
            self.pool.cache(sequence.blocks[index], sequence.block_hashes[index])
        sequence.num_cached_blocks = max(sequence.num_cached_blocks, full)

    def _preempt(self, sequence: Sequence) -> None:
        self._free(sequence)
        sequence.num_computed = 0
        sequence.num_cached_blocks = 0
        self.waiting.appendleft(sequence)

    def _free(self, sequence: Sequence) -> None:
        self.pool.release(sequence.blocks)
        sequence.blocks = []
