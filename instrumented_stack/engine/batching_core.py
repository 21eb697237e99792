"""The emulator's engine core: vLLM v1's busy loop over the :class:`Scheduler`, in asyncio.

vLLM's ``EngineCore`` loops: schedule a step, run the model on it, apply the output. Here one background
task does the same: :meth:`Scheduler.schedule`, sleep for the step's modeled time divided by the speed
factor (:class:`StepTimeModel`), :meth:`Scheduler.complete` at the wall-clock end of the step, then resolve
the finished requests' futures. Timelines hold the monotonic times actually observed, so spans, metrics
and client-side latencies agree; at high speed factors Python's own per-step overhead adds to the modeled
time rather than being hidden.

Metrics (:class:`EngineMetrics`) are recorded at the points vLLM records them: scheduler state after
planning, iteration stats after each step, per-request histograms when a request finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from instrumented_stack.engine.core import EngineRequest, EngineResult, RequestTimeline, TokenListener
from instrumented_stack.engine.kv_cache import block_hashes
from instrumented_stack.engine.metrics import EngineMetrics
from instrumented_stack.engine.scheduler import Scheduler, SchedulerConfig, Sequence, StepPlan
from instrumented_stack.engine.time_model import StepTimeModel


class BatchingEngineCore:
    """:class:`~instrumented_stack.engine.core.EngineCore` driven by a :class:`Scheduler`.

    Args:
        scheduler: the scheduler's limits.
        time_model: the cost of a step and the speed factor.
        metrics: where vLLM's metrics go; ``None`` records none.

    Use from one asyncio event loop; the step loop starts with the first request and runs until
    :meth:`aclose`.

    Raises:
        SchedulerConfigError: from :meth:`generate`, for a request larger than the KV cache.
    """

    def __init__(
        self, scheduler: SchedulerConfig, time_model: StepTimeModel, metrics: EngineMetrics | None = None
    ) -> None:
        self._scheduler = Scheduler(scheduler)
        self._time_model = time_model
        self._metrics = metrics
        self._futures: dict[int, asyncio.Future[Sequence]] = {}
        self._listeners: dict[int, TokenListener] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler (read-only use: queue lengths, KV usage)."""
        return self._scheduler

    async def generate(self, request: EngineRequest, on_token: TokenListener | None = None) -> EngineResult:
        """Queue ``request``, wait until its last token; cancelling aborts it and frees its KV blocks.

        ``on_token`` is called after each step that sampled a token for ``request``, with the count so far and
        the prompt tokens served from the prefix cache.
        """
        hashes = block_hashes(request.prompt_token_ids, self._scheduler.config.block_size)
        sequence = self._scheduler.add(request, hashes, time.monotonic(), time.time_ns())
        future: asyncio.Future[Sequence] = asyncio.get_running_loop().create_future()
        self._futures[id(sequence)] = future
        if on_token is not None:
            self._listeners[id(sequence)] = on_token
        self._ensure_loop()
        self._wake.set()
        try:
            done = await future
        except asyncio.CancelledError:
            self._scheduler.abort(sequence)
            raise
        finally:
            self._futures.pop(id(sequence), None)
            self._listeners.pop(id(sequence), None)
        return _result(done)

    async def aclose(self) -> None:
        """Stop the step loop and cancel whoever still waits. Idempotent."""
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for future in self._futures.values():
            future.cancel()

    def _ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="engine-core-steps")

    async def _run(self) -> None:
        scheduler = self._scheduler
        while True:
            if not scheduler.has_work:
                self._wake.clear()
                await self._wake.wait()
                continue
            started = time.monotonic()
            plan = scheduler.schedule(started)
            self._record_scheduler(plan)
            modeled_s = self._time_model.step_s(plan.prefill_tokens, plan.decode_seqs, plan.decode_kv_tokens)
            # Sleep to the step's deadline (not for a fixed time) so event-loop overhead does not accumulate.
            await asyncio.sleep(max(0.0, started + self._time_model.wall_s(modeled_s) - time.monotonic()))
            self._complete(plan, time.monotonic())

    def _record_scheduler(self, plan: StepPlan) -> None:
        if self._metrics is None:
            return
        scheduler = self._scheduler
        self._metrics.record_scheduler(
            running=len(scheduler.running),
            waiting=len(scheduler.waiting),
            kv_cache_usage=scheduler.pool.usage,
            prefix_queries=plan.prefix_queries,
            prefix_hits=plan.prefix_hits,
        )

    def _complete(self, plan: StepPlan, now_s: float) -> None:
        outcome = self._scheduler.complete(plan, now_s)
        if self._metrics is not None:
            self._metrics.record_iteration(
                preemptions=plan.preempted,
                prompt_tokens=outcome.prompt_tokens,
                generation_tokens=outcome.generation_tokens,
                step_tokens=sum(tokens for _, tokens in plan.work),
                first_token_latencies_s=outcome.first_token_latencies_s,
                inter_token_latencies_s=outcome.inter_token_latencies_s,
            )
            # The gauges after the step, so a scrape between steps sees finished requests gone.
            self._metrics.running.set(len(self._scheduler.running))
            self._metrics.waiting.set(len(self._scheduler.waiting))
            self._metrics.kv_cache_usage.set(self._scheduler.pool.usage)
        for sequence in outcome.sampled:
            listener = self._listeners.get(id(sequence))
            if listener is not None:
                listener(sequence.num_output, sequence.cached_tokens)
        for sequence in outcome.finished:
            if self._metrics is not None:
                self._metrics.record_finished(sequence, sequence.finish_reason)
            future = self._futures.get(id(sequence))
            if future is not None and not future.done():
                future.set_result(sequence)


def _result(sequence: Sequence) -> EngineResult:
    scheduled, first, last, finished = (
        sequence.scheduled_s,
        sequence.first_token_s,
        sequence.last_token_s,
        sequence.finished_s,
    )
    if scheduled is None or first is None or last is None or finished is None:
        raise RuntimeError("a sequence resolved before it finished")
    timeline = RequestTimeline(
        arrival_unix_ns=sequence.arrival_unix_ns,
        arrival_s=sequence.arrival_s,
        queued_s=sequence.arrival_s,
        scheduled_s=scheduled,
        first_token_s=first,
        last_token_s=last,
        finished_s=finished,
    )
    return EngineResult(
        timeline=timeline,
        completion_tokens=sequence.num_output,
        finish_reason=sequence.finish_reason,
        cached_tokens=sequence.cached_tokens,
    )
