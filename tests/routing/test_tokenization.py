"""Text and chat requests are tokenized by a candidate engine's own /tokenize (compatibility.md
2.6), with fallback to the next candidate, a 503 when none can, and a cache for repeated prompts."""

import pytest

from kvadmin.engines.models import Engine
from kvadmin.fleet.tokenizer import Message, encode, encode_chat
from kvadmin.routing.tokenize import request_body
from tests.index import MODEL
from tests.routing.conftest import dead_url, hold, local_pod

pytestmark = pytest.mark.django_db

PROMPT = "The quick brown fox jumps over the lazy dog. " * 12
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "you"}]},
]


def _register(pod: str, url: str, kind: str = "vllm") -> None:
    Engine.objects.create(
        pod=pod, model=MODEL, kind=kind, events_endpoint="tcp://127.0.0.1:5557", http_base_url=url
    )


def test_a_prompt_is_scored_with_the_engines_tokens(start_fleet, post_score, redis_client):
    pod = start_fleet(local_pod("vllm-0.default")).pods[0]
    _register(pod.name, pod.config.http_url)
    expected = encode(PROMPT)
    hold(redis_client, pod.name, expected, ["GPU"] * 3)
    status, answer = post_score({"model": MODEL, "prompt": PROMPT})
    assert status == 200, answer
    assert answer["input"] == "prompt" and answer["tokens"] == len(expected)
    assert answer["scores"][0]["matched_blocks"] == 3
    assert answer["timings_ms"]["tokenize"] > 0


def test_chat_messages_get_the_engines_chat_template(start_fleet, post_score, redis_client):
    pod = start_fleet(local_pod("sglang-0.default", "sglang")).pods[0]
    _register(pod.name, pod.config.http_url, "sglang")
    expected = encode_chat([Message("system", "You are terse."), Message("user", "Hi\nyou")])
    hold(redis_client, pod.name, expected, ["CPU_PINNED"])
    status, answer = post_score({"model": MODEL, "messages": CHAT})
    assert status == 200, answer
    assert answer["tokens"] == len(expected) and answer["chosen"] == pod.name
    assert answer["scores"][0]["media"] == {"CPU_PINNED": 1}


def test_a_failing_engine_falls_back_to_the_next_candidate(
    start_fleet, post_score, redis_client
) -> None:
    pod = start_fleet(local_pod("vllm-1.default")).pods[0]
    _register("vllm-0.default", dead_url())
    _register(pod.name, pod.config.http_url)
    for n in range(3):  # each call starts at another candidate: the dead one comes first too
        status, answer = post_score({"model": MODEL, "prompt": f"{PROMPT} {n}"})
        assert status == 200, answer
        assert answer["tokens"] == len(encode(f"{PROMPT} {n}"))


def test_it_is_a_503_when_every_candidate_fails(post_score, redis_client) -> None:
    _register("vllm-0.default", dead_url())
    _register("vllm-1.default", dead_url())
    _register("vllm-2.default", "")  # no HTTP base URL: cannot tokenize
    status, answer = post_score({"model": MODEL, "prompt": PROMPT})
    assert status == 503 and answer["field"] == "prompt"
    assert "vllm-0.default" in answer["error"] and "vllm-1.default" in answer["error"]


def test_an_engine_answering_an_error_counts_as_failed(start_fleet, post_score) -> None:
    other = local_pod("vllm-0.default")
    pod = start_fleet(other).pods[0]
    # The pod serves MODEL; registered under another model name, it answers 404 to /tokenize.
    Engine.objects.create(
        pod=pod.name,
        model="other/model",
        kind="vllm",
        events_endpoint="tcp://127.0.0.1:5557",
        http_base_url=pod.config.http_url,
    )
    status, answer = post_score({"model": "other/model", "prompt": PROMPT})
    assert status == 503 and "HTTP 404" in answer["error"]


def test_a_repeated_prompt_is_not_tokenized_twice(start_fleet, post_score, redis_client) -> None:
    fleet = start_fleet(local_pod("vllm-0.default"))
    pod = fleet.pods[0]
    _register(pod.name, pod.config.http_url)
    first_status, first = post_score({"model": MODEL, "prompt": PROMPT})
    fleet.stop()  # nobody can tokenize any more
    status, again = post_score({"model": MODEL, "prompt": PROMPT})
    assert (first_status, status) == (200, 200)
    assert again["tokens"] == first["tokens"]
    assert post_score({"model": MODEL, "prompt": PROMPT + "!"})[0] == 503  # nobody tokenizes


def test_the_tokenize_bodies_are_kthenas() -> None:
    assert request_body("vllm", MODEL, prompt="hi") == {
        "model": MODEL,
        "prompt": "hi",
        "add_special_tokens": True,
        "return_token_strs": False,
    }
    assert request_body("sglang", MODEL, prompt="hi") == {
        "model": MODEL,
        "prompt": "hi",
        "add_special_tokens": True,
    }
    chat = [{"role": "user", "content": "hi"}]
    assert request_body("vllm", MODEL, messages=chat) == {
        "model": MODEL,
        "messages": chat,
        "add_special_tokens": False,
        "add_generation_prompt": True,
        "return_token_strs": False,
    }
    assert request_body("sglang", MODEL, messages=chat) == {
        "model": MODEL,
        "messages": chat,
        "add_special_tokens": False,
    }
