"""Engine /tokenize calls are bounded like the load scraper's: one deadline for the whole
exchange, a byte cap, and any failure (a drip, an oversized answer, a hang-up mid-answer)
moves on to the next engine; all failing is a clean 503. One model's engines holding their
answers never take the threads another model's requests are scored in (the real ASGI server)."""

import concurrent.futures as cf
import json
from collections.abc import Iterator

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.tokenizer import encode
from tests.conftest import http_json, start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import local_pod, request_tokens
from tests.routing.hostile_engine import hostile_engine
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
MODES = ["drip", "drip_headers", "huge", "hang_up", "hang_up_chunked"]
PROMPT = "The quick brown fox jumps over the lazy dog. " * 4


def _register(pod: str, url: str, model: str = MODEL) -> None:
    Engine.objects.create(
        pod=pod, model=model, kind="vllm", events_endpoint="tcp://127.0.0.1:5557", http_base_url=url
    )


@pytest.fixture
def quick_tokenize(settings) -> None:
    settings.KVADMIN = {**getattr(settings, "KVADMIN", {}), "TOKENIZE_TIMEOUT": 1.0}


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_engine_is_passed_over_for_the_next(
    start_fleet, post_score, redis_client, quick_tokenize, mode
) -> None:
    pod = start_fleet(local_pod("vllm-1.default")).pods[0]
    with hostile_engine(mode) as hostile:
        _register("vllm-0.default", hostile.url)
        _register(pod.name, pod.config.http_url)
        for n in range(4):  # each call starts at another engine: the hostile one first too
            status, answer = post_score({"model": MODEL, "prompt": f"{PROMPT} {n}"})
            assert status == 200, answer
            assert answer["tokens"] == len(encode(f"{PROMPT} {n}"))


@pytest.mark.parametrize("mode", MODES)
def test_hostile_engines_alone_are_a_clean_503(
    post_score, redis_client, quick_tokenize, mode
) -> None:
    with hostile_engine(mode) as first, hostile_engine(mode) as second:
        _register("vllm-0.default", first.url)
        _register("vllm-1.default", second.url)
        status, answer = post_score({"model": MODEL, "prompt": PROMPT})
    assert status == 503, answer
    assert answer["field"] == "prompt"
    assert "vllm-0.default" in answer["error"] and "vllm-1.default" in answer["error"]


@pytest.fixture
def server(subprocess_env) -> Iterator[str]:
    env = subprocess_env | {
        "KVADMIN_TOKENIZE_TIMEOUT": "60",
        "KVADMIN_TOKENIZE_WAITING_PER_MODEL": "2",
    }
    process, url = start_asgi_server(env)
    yield url
    stop_process(process)


def _slow(n: int) -> dict[str, str]:
    return {"model": "slow/model", "prompt": f"p{n}"}


@pytest.mark.django_db(transaction=True)
def test_a_models_held_engines_do_not_starve_another_models_requests(server, redis_client) -> None:
    token = ApiToken.issue("gateway")[1]
    with hostile_engine("hold") as held:
        _register("slow-0.default", held.url, model="slow/model")
        _register("vllm-0.default", "", model=MODEL)
        with cf.ThreadPoolExecutor(12) as pool:
            waiting = [
                pool.submit(
                    http_json,
                    f"{server}/api/v1/score",
                    {"model": "slow/model", "prompt": f"p{n}"},
                    token,
                )
                for n in range(12)
            ]
            wait_until(lambda: held.holding >= 2, timeout=30, what="two requests held")
            # Every thread a request scores in would be held by now without a bound.
            status, answer = http_json(
                f"{server}/api/v1/score", {"model": MODEL, "token_ids": request_tokens(2)}, token
            )
            assert status == 200, answer
            assert held.holding >= 1, "answered while the slow model's requests are held"
            # The requests past the bound are refused while the engine still holds two.
            wait_until(
                lambda: sum(f.done() for f in waiting) >= len(waiting) - 2,
                timeout=30,
                what="the requests past the bound answered",
            )
            refused = [f.result() for f in waiting if f.done()]
            held.released.set()
            results = [f.result() for f in waiting]
    assert held.most <= 2, "no more than TOKENIZE_WAITING_PER_MODEL wait on the engines"
    assert all(status in (200, 503) for status, _ in results), results
    assert any("wait on the engines" in json.dumps(answer) for _, answer in refused)
