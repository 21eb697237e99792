"""vLLM's Prometheus metrics for the emulator, under vLLM's names, labels and buckets.

Source: ``PrometheusStatLogger`` in ``vllm/v1/metrics/loggers.py`` (vllm-project/vllm), read for names,
label sets, bucket boundaries and *when* each value is recorded; none of its code is used. Every series has
the labels ``model_name`` (the served model name) and ``engine`` (the engine index, ``"0"`` here);
``vllm:request_success`` adds ``finished_reason``. Counter names are given without ``_total``, which
``prometheus_client`` appends in the exposition (``vllm:prompt_tokens_total``), exactly as vLLM's are.

Each :class:`EngineMetrics` owns its own ``CollectorRegistry``, never the process-global one, so several
engines in one process (tests, the threaded stack) keep separate series. Units: latencies in **seconds**,
prefix-cache queries/hits in **tokens**, KV usage as a fraction 0..1.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from instrumented_stack.engine.scheduler import Sequence

LABEL_NAMES: tuple[str, ...] = ("model_name", "engine")

TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""``vllm:time_to_first_token_seconds`` boundaries (22)."""

TOKEN_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""``vllm:inter_token_latency_seconds`` boundaries (19, shared with the per-output-token histograms)."""

REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
"""Boundaries of e2e, queue, inference, prefill and decode time histograms (21)."""

ITERATION_TOKEN_BUCKETS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
"""``vllm:iteration_tokens_total`` boundaries."""

FINISH_REASONS: tuple[str, ...] = ("stop", "length", "abort")


def one_two_five_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's token-count histogram boundaries)."""
    buckets: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_value:
                return buckets
            buckets.append(value)
        scale *= 10


class EngineMetrics:
    """The emulator's vLLM metric families, labelled for one engine.

    Args:
        model_name: value of the ``model_name`` label (``--served-model-name``).
        max_model_len: sizes the token-count histograms' buckets.
        engine_index: value of the ``engine`` label.

    Call from the engine core's event loop; :meth:`exposition` may be called from any thread.
    """

    def __init__(self, model_name: str, max_model_len: int, engine_index: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = (model_name, str(engine_index))
        token_buckets = one_two_five_buckets(max_model_len)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABEL_NAMES, registry=self.registry).labels(*labels)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABEL_NAMES, registry=self.registry).labels(*labels)

        def histogram(name: str, doc: str, buckets: Iterable[float]) -> Histogram:
            return Histogram(name, doc, LABEL_NAMES, registry=self.registry, buckets=tuple(buckets)).labels(*labels)

        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_cache_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_cache_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_cache_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*LABEL_NAMES, "finished_reason"),
            registry=self.registry,
        )
        self.request_success = {reason: success.labels(*labels, reason) for reason in FINISH_REASONS}
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKEN_BUCKETS
        )
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.time_to_first_token = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS_S
        )
        self.inter_token_latency = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TOKEN_LATENCY_BUCKETS_S
        )

        def request_time(name: str, doc: str) -> Histogram:
            return histogram(name, doc, REQUEST_LATENCY_BUCKETS_S)

        self.e2e_latency = request_time(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."
        )
        self.queue_time = request_time(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request."
        )
        self.inference_time = request_time(
            "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request."
        )
        self.prefill_time = request_time(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request."
        )
        self.decode_time = request_time(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request."
        )

    def record_scheduler(
        self, *, running: int, waiting: int, kv_cache_usage: float, prefix_queries: int, prefix_hits: int
    ) -> None:
        """Scheduler state after planning a step (vLLM's ``SchedulerStats``)."""
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv_cache_usage.set(kv_cache_usage)
        self.prefix_cache_queries.inc(prefix_queries)
        self.prefix_cache_hits.inc(prefix_hits)

    def record_iteration(
        self,
        *,
        preemptions: int,
        prompt_tokens: int,
        generation_tokens: int,
        step_tokens: int,
        first_token_latencies_s: Iterable[float],
        inter_token_latencies_s: Iterable[float],
    ) -> None:
        """What one completed step produced (vLLM's ``IterationStats``)."""
        self.preemptions.inc(preemptions)
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(generation_tokens)
        if step_tokens:
            self.iteration_tokens.observe(step_tokens)
        for latency in first_token_latencies_s:
            self.time_to_first_token.observe(latency)
        for latency in inter_token_latencies_s:
            self.inter_token_latency.observe(latency)

    def record_finished(self, sequence: Sequence, finish_reason: str) -> None:
        """A finished request's per-request histograms (vLLM's ``FinishedRequestStats``).

        Queue time is scheduled - queued, prefill first token - scheduled, decode last token - first
        token, inference last token - scheduled, e2e finished - arrival; all **seconds**, the same
        differences the ``llm_request`` span carries.
        """
        scheduled, first, last, finished = (
            sequence.scheduled_s,
            sequence.first_token_s,
            sequence.last_token_s,
            sequence.finished_s,
        )
        if scheduled is None or first is None or last is None or finished is None:
            raise ValueError("record_finished needs a finished sequence")
        self.request_success[finish_reason].inc()
        self.e2e_latency.observe(finished - sequence.arrival_s)
        self.queue_time.observe(scheduled - sequence.arrival_s)
        self.prefill_time.observe(first - scheduled)
        self.decode_time.observe(last - first)
        self.inference_time.observe(last - scheduled)
        self.request_prompt_tokens.observe(sequence.request.prompt_tokens)
        self.request_generation_tokens.observe(sequence.num_output)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
