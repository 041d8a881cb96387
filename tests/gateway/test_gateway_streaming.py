"""Streamed answers (server-sent events) pass through the gateway chunk by chunk, unchanged,
and the picker still finds their usage in the final chunk."""

import http.client
import json
import time

import pytest
import redis

from kvadmin.gateway.protocol import DECISION_HEADER
from kvadmin.routing import outcomes
from tests.gateway.conftest import logged
from tests.index import MODEL
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def events(url: str, body: dict) -> tuple[dict[str, str], list[tuple[float, bytes]]]:
    """The answer's headers and each `data:` line with when it arrived."""
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=patient(30))
    connection.request("POST", "/v1/completions", json.dumps(body).encode(), {})
    response = connection.getresponse()
    assert response.status == 200
    arrived = []
    while line := response.readline():
        if line.startswith(b"data: "):
            arrived.append((time.monotonic(), line))
    connection.close()
    return {k.lower(): v for k, v in response.getheaders()}, arrived


def test_chunks_arrive_as_the_pod_sends_them_unchanged(gateway_of, redis_client: redis.Redis):
    """The pod sends a word every 0.2 s (1 s of decode over 5 words): a gateway that held the
    body back would deliver every chunk at once, at the end."""
    gateway = gateway_of(2, time_scale=1.0, decode_seconds=1.0)
    body = {
        "model": MODEL,
        "prompt": "stream me the words " * 20,
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers, through_gateway = events(gateway.url, body)
    assert through_gateway[-1][1] == b"data: [DONE]\n"
    assert through_gateway[-2][0] - through_gateway[0][0] >= 0.6
    chunks = [json.loads(line[6:]) for _, line in through_gateway[:-1]]
    pod = chunks[-1]["kvadmin"]["pod"]
    address = next(a for a, p in gateway.pods.items() if p == pod)
    _, direct = events(f"http://{address}", body)

    def shape(chunk: dict) -> dict:
        return {k: v for k, v in chunk.items() if k not in ("id", "created", "usage", "kvadmin")}

    assert [shape(c) for c in chunks] == [shape(json.loads(line[6:])) for _, line in direct[:-1]]
    decision = logged(headers[DECISION_HEADER], redis_client)
    assert decision is not None and decision.chosen == pod
    recorded = wait_until(
        lambda: outcomes.outcomes_of(redis_client, [decision.decision_id]).get(
            decision.decision_id
        ),
        what="the streamed answer's outcome",
    )
    usage = chunks[-1]["usage"]
    assert recorded.prompt_tokens == usage["prompt_tokens"]
    assert recorded.cached_tokens == usage["prompt_tokens_details"]["cached_tokens"]
    # Timed to the first chunk, not to the end of the stream.
    total_ms = (through_gateway[-1][0] - through_gateway[0][0]) * 1000
    assert recorded.ttft_ms is not None and recorded.ttft_ms < total_ms
