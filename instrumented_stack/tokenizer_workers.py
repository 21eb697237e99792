"""The LLM client's tokenizer workers: each loads the tokenizer lazily, on its first request.

A serving process commonly has several workers (threads, processes or pooled objects), each with its own
tokenizer instance created on first use. The cost of that first load is a *cold start*. Requests are spread
over ``workers`` workers round-robin; a worker that has served ``max_requests_per_worker`` requests is
recycled (its tokenizer dropped), as servers recycle workers to bound memory. ``None`` never recycles, so
only each worker's first request pays the load; ``1`` makes every request a cold start (the
``tokenizer_cold_start`` fault).

Loading reads ``tokenizer.json`` from disk, builds the model (:meth:`BpeTokenizer.from_file`) and warms it
up by encoding the corpus once, as serving workers do so their first real request is not the slow one -
which a lazily loading worker defeats. About 15 ms here; a production tokenizer (100k+ vocabulary) takes
hundreds. It runs inside a ``load_tokenizer`` span (INTERNAL, ``llm.tokenizer.worker``) when a tracer is
given.
Use from one event loop; loading blocks it, as loading a tokenizer does in a real server.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.trace import SpanKind, Tracer

from instrumented_stack.corpus import corpus_texts
from instrumented_stack.tokenizer import BpeTokenizer

LOAD_SPAN = "load_tokenizer"


@dataclass(slots=True)
class _Worker:
    tokenizer: BpeTokenizer | None = None
    served: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's tokenizer for one request; ``loaded`` is true when this request paid the load."""

    worker: int
    tokenizer: BpeTokenizer
    loaded: bool


class TokenizerWorkers:
    """Round-robin tokenizer workers over one ``tokenizer.json``.

    Args:
        path: the tokenizer file.
        workers: number of workers (>= 1).
        max_requests_per_worker: recycle a worker after this many requests; ``None``: never.
        tracer: records a ``load_tokenizer`` span per load; ``None``: no span.

    Raises:
        ValueError: ``workers`` or ``max_requests_per_worker`` below 1.
    """

    def __init__(
        self,
        path: Path,
        workers: int = 4,
        max_requests_per_worker: int | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        if workers < 1 or (max_requests_per_worker is not None and max_requests_per_worker < 1):
            raise ValueError(
                f"workers and max_requests_per_worker must be >= 1, got {workers}, {max_requests_per_worker}"
            )
        self._path = path
        self._workers = [_Worker() for _ in range(workers)]
        self._next = itertools.cycle(range(workers))
        self._max_requests = max_requests_per_worker
        self._tracer = tracer

    def lease(self) -> Lease:
        """The next worker's tokenizer, loading it first if the worker has none (a cold start)."""
        index = next(self._next)
        worker = self._workers[index]
        if self._max_requests is not None and worker.served >= self._max_requests:
            worker.tokenizer, worker.served = None, 0
        loaded = worker.tokenizer is None
        if worker.tokenizer is None:
            worker.tokenizer = self._load(index)
        worker.served += 1
        return Lease(index, worker.tokenizer, loaded)

    def _load(self, index: int) -> BpeTokenizer:
        if self._tracer is None:
            return _load_and_warm_up(self._path)
        with self._tracer.start_as_current_span(
            LOAD_SPAN, kind=SpanKind.INTERNAL, attributes={"llm.tokenizer.worker": index}
        ):
            return _load_and_warm_up(self._path)


def _load_and_warm_up(path: Path) -> BpeTokenizer:
    tokenizer = BpeTokenizer.from_file(path)
    for text in corpus_texts():
        tokenizer.encode(text)
    return tokenizer
