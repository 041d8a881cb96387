"""Two real web processes (uvicorn) scoring the same prefix at once share one virtual queue: every
advance is computed in Redis, so no routed prefill is lost or overlaps another on its pod, and a
request leaves the prefix's pod only when the queue it saw there made that worth it."""

from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from scoring.choice import tie_break
from scoring.keys import in_flight_key, queue_key
from tests.conftest import http_json, start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import PODS, request_tokens

REQUESTS = 16


@pytest.fixture
def two_web_processes(subprocess_env: dict[str, str]) -> Iterator[list[str]]:
    """Two real web servers sharing the session's Redis; their base URLs."""
    # A long in-flight window: no entry is trimmed while the test reads them back.
    env = subprocess_env | {"KVADMIN_ROUTING_IN_FLIGHT_SECONDS": "600"}
    servers = [start_asgi_server(env) for _ in range(2)]
    yield [url for _process, url in servers]
    stop_process(*(process for process, _url in servers))


def test_concurrent_same_prefix_requests_share_one_atomic_queue(
    two_web_processes, transactional_db, redis_client
) -> None:
    for i, pod in enumerate(PODS):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
    token = ApiToken.issue("gateway", "score")[1]
    body = {"model": MODEL, "token_ids": request_tokens(128)}  # 2,048 tokens, ~0.22 s cold prefill

    def score(n: int) -> dict:
        url = two_web_processes[n % 2]
        status, answer = http_json(f"{url}/api/v1/score", body, token)
        assert status == 200, answer
        return answer

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(score, range(REQUESTS)))

    routed: dict[str, list[dict]] = defaultdict(list)
    for answer in answers:
        routed[answer["chosen"]].append(answer)
    for pod, on_pod in routed.items():
        ends = dict(redis_client.zrange(in_flight_key(pod), 0, -1, withscores=True))
        assert set(ends) == {answer["decision_id"] for answer in on_pod}, "a lost advance"
        busy_until = float(redis_client.hget(queue_key(pod), "busy_until_ms"))
        assert busy_until == pytest.approx(max(ends.values()), abs=0.01)
        # Each prefill starts when the previous one on the pod ends, or later: none overlap.
        on_pod.sort(key=lambda answer: ends[answer["decision_id"]])
        for before, after in zip(on_pod, on_pod[1:], strict=False):
            prefill_ms = next(e for e in after["estimates"] if e["pod"] == pod)["prefill_s"] * 1000
            gap = ends[after["decision_id"]] - ends[before["decision_id"]]
            assert gap >= prefill_ms - 0.002, (pod, gap, prefill_ms)

    # Nobody held the prefix: ties go to its rendezvous pod, and a request went elsewhere only
    # because the queue it saw there cost more than the cached prefix saved.
    home = tie_break(answers[0]["first_block"], PODS)
    assert home in routed
    for answer in answers:
        if answer["chosen"] != home:
            at_home = next(e for e in answer["estimates"] if e["pod"] == home)
            assert at_home["wait_s"] > 0 and at_home["cost_s"] > answer["estimates"][0]["cost_s"]
