"""The beat task samples every pod's blocks per medium and pushes the refreshed pods table
to open /pods/ pages, through a real Celery worker, the channel layer and the ASGI server."""

import asyncio
from urllib.parse import urlsplit

import pytest
import websockets
from asgiref.sync import async_to_sync
from django.conf import settings

from kvadmin.residency.tasks import sample_pods
from scoring.keys import pod_samples_key
from tests.index import NOW
from tests.residency.conftest import register
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_celery_beat_runs_it_every_few_seconds() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["residency-sample-pods"]

    assert entry["task"] == sample_pods.name == "kvadmin.residency.tasks.sample_pods"
    assert entry["schedule"] <= 10


def test_a_worker_records_a_sample_of_every_pod(celery_worker, index, redis_client) -> None:
    register("vllm-0.default")
    index.store("vllm-7.default", range(3), at=NOW)

    sample_pods.delay()

    for pod in ("vllm-0.default", "vllm-7.default"):
        wait_until(
            lambda pod=pod: redis_client.zcard(pod_samples_key(pod)), what=f"a sample of {pod}"
        )
    [sample] = redis_client.zrange(pod_samples_key("vllm-7.default"), 0, -1)
    assert '"c":{"GPU":3}' in sample


async def _first_frame(url: str, headers: dict[str, str]) -> str:
    async with websockets.connect(url, additional_headers=headers) as socket:
        # The group join may race the first publish: ask the worker again until a frame comes.
        for _ in range(50):
            await asyncio.to_thread(sample_pods.delay)
            try:
                return await asyncio.wait_for(socket.recv(), timeout=0.5)
            except TimeoutError:
                continue
    raise AssertionError("no frame arrived")


def test_open_pods_pages_get_the_refreshed_table(
    celery_worker, asgi_server, session_cookie, index
) -> None:
    register("vllm-0.default")
    index.store("vllm-0.default", range(4), at=NOW)
    url = f"ws://{urlsplit(asgi_server).netloc}/ws/pods/"

    frame = async_to_sync(_first_frame)(url, {"Cookie": session_cookie, "Origin": asgi_server})

    assert frame.lstrip().startswith('<div id="pods-table" hx-swap-oob="true"')
    assert 'data-pod="vllm-0.default"' in frame and 'aria-label="GPU 4 blocks"' in frame
