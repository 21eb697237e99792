"""Fixtures for hotspan_sdk tests: real MeterProviders with in-memory readers."""

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from sdk_support import Metrics


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield Metrics(provider, reader)
    provider.shutdown()
