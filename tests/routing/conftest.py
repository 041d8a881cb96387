"""Fixtures for scoring requests: registered engines, a block index, an API token, and
simulated pods that tokenize."""

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.pod import PodConfig
from kvadmin.redis_server import free_port
from kvadmin.routing.tokenize import CACHE
from scoring.hashing import block_hashes
from scoring.keys import block_value
from tests.conftest import local_config
from tests.index import MODEL, write_kthena_index
from tests.ingest.conftest import publisher, start_loop  # noqa: F401 (restart fixtures)

PODS = ("vllm-0.default", "vllm-1.default", "vllm-2.default")
WRITTEN_AT = 1_760_000_000


def request_tokens(blocks: int, start: int = 0) -> list[int]:
    """A request's token ids: `blocks` full blocks; a different `start` gives different content."""
    return list(range(start, start + 16 * blocks))


def hold(
    client: redis.Redis,
    pod: str,
    token_ids: Sequence[int],
    media: Sequence[str | None],
    model: str = MODEL,
    written_at: int = WRITTEN_AT,
) -> None:
    """The index, as kthena's sidecar writes it, says `pod` holds the first len(media) blocks
    of `token_ids`, in those media."""
    blocks = zip(block_hashes(token_ids), media, strict=False)
    owners = {block: {pod: block_value(written_at, medium)} for block, medium in blocks}
    write_kthena_index(client, owners, model)


@pytest.fixture(autouse=True)
def _empty_token_cache() -> Iterator[None]:
    """Every test starts and ends with no token ids cached, so each asks the tokenizer."""
    CACHE.clear()
    yield
    CACHE.clear()


@pytest.fixture
def engines(db) -> list[Engine]:
    """Three enabled vLLM engines serving MODEL (no HTTP: token ids only)."""
    return [
        Engine.objects.create(
            pod=pod, model=MODEL, kind="vllm", events_endpoint=f"tcp://127.0.0.1:{5557 + i}"
        )
        for i, pod in enumerate(PODS)
    ]


@pytest.fixture
def token(db) -> str:
    """A gateway's API token."""
    return ApiToken.issue("gateway", "score decisions:read")[1]


Post = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture
def post_score(client, token) -> Post:
    """POST /api/v1/score in-process; returns the status and the JSON answer."""

    def post(body: Any, auth: str | None = token) -> tuple[int, dict[str, Any]]:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {auth}"} if auth else {}
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        response = client.post(
            "/api/v1/score", data=data, content_type="application/json", **headers
        )
        return response.status_code, json.loads(response.content)

    return post


def local_pod(name: str, kind: str = "vllm") -> PodConfig:
    return local_config(name, kind, model=MODEL)


def dead_url() -> str:
    """An HTTP base URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"
