"""Operations tests reuse ingestion's publisher and ingest-loop fixtures and scrape /metrics
the way Prometheus does."""

from collections.abc import Callable

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from tests.index import MODEL
from tests.ingest.conftest import publisher, start_loop  # noqa: F401  (shared fixtures)

POD = "vllm-0.default"
STREAM = {"pod": POD, "rank": "0"}
"""The labels of the engine's rank-0 stream on /metrics."""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
Scrape = Callable[[], Samples]


def parse(text: str) -> Samples:
    """sample name + labels -> value, e.g. ("kvadmin_ingest_batches_total", {pod, rank})."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def scrape(db) -> Scrape:
    """GET /metrics with a Prometheus scraper's API token; the parsed samples."""
    _, token = ApiToken.issue("prometheus", "metrics")
    client = Client()

    def get() -> Samples:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=")
        return parse(response.content.decode())

    return get


@pytest.fixture
def engine(publisher) -> Engine:  # noqa: F811  (the fixture it is)
    """The publisher, registered as an engine."""
    return Engine.objects.create(
        pod=POD,
        model=MODEL,
        kind="vllm",
        events_endpoint=publisher.endpoint,
        replay_endpoint=publisher.replay_endpoint,
        topic="kv-events",
    )
