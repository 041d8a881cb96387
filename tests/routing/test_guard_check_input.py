"""The consistency guard asks an engine to tokenize a long text prompt only so far past the
local window as it needs (`routing.tokenize.check_input`): the engine's first `keep` ids of
that prefix are the local ones, as they are of the whole prompt, at a fraction of the
engine's work; what the local tokenizer read whole (or rendered from a chat) is checked
whole, its count with it."""

import random

import pytest

from kvadmin.fleet.pod import PodConfig
from kvadmin.routing.local_tokenize import tokenize_locally
from kvadmin.routing.tokenize import CHECK_READ_FACTOR, check_input, request_body, text_of
from tests.conftest import http_json, local_config
from tests.index import MODEL

KEEP = 16 * 128
WORDS = ["cache", "prefix", "块", "tokens", "1234567", "\n\n", "don't", "GPU", "(x)"]


def _long_prompt(words: int) -> str:
    rng = random.Random(11)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _engine_ids(url: str, prompt: str) -> list[int]:
    status, answer = http_json(f"{url}/tokenize", request_body("vllm", MODEL, prompt))
    assert status == 200, answer
    return answer["tokens"]


def _pod(tokenizer: str) -> PodConfig:
    return local_config("vllm-0.default", "vllm", model=MODEL, tokenizer=tokenizer)


def test_a_long_prompt_is_checked_on_a_prefix_whose_ids_are_the_local_ones(
    start_fleet, deepseek_v4
) -> None:
    url = start_fleet(_pod(deepseek_v4)).pods[0].config.http_url
    prompt = _long_prompt(40_000)
    found = tokenize_locally(deepseek_v4, prompt=prompt, keep=KEEP)

    checked = check_input(text_of(MODEL, prompt=prompt, keep=KEEP), found)

    assert found.estimated
    assert checked.prompt == prompt[: CHECK_READ_FACTOR * found.read]
    assert len(checked.prompt) < len(prompt) / 4
    assert _engine_ids(url, checked.prompt)[:KEEP] == found.tokens
    assert _engine_ids(url, prompt)[:KEEP] == found.tokens


@pytest.mark.parametrize("words", [100, 1_000])
def test_a_prompt_read_whole_is_checked_whole(deepseek_v4, words) -> None:
    prompt = _long_prompt(words)
    found = tokenize_locally(deepseek_v4, prompt=prompt, keep=KEEP)
    text = text_of(MODEL, prompt=prompt, keep=KEEP)

    assert not found.estimated and found.read == len(prompt)
    assert check_input(text, found) is text


def test_a_long_chat_is_checked_whole(deepseek_v4) -> None:
    messages = [{"role": "user", "content": _long_prompt(40_000)}]
    found = tokenize_locally(deepseek_v4, messages=messages, keep=KEEP)
    text = text_of(MODEL, messages=messages, keep=KEEP)

    assert found.estimated
    assert check_input(text, found) is text
