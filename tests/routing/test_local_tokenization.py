"""A model whose engines name a tokenizer is tokenized in-process: the ids its engines'
/tokenize would give (compatibility.md 2.6 bodies), without asking them; the decision says so."""

import os
import random
from pathlib import Path

import pytest
from django.test import override_settings
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from kvadmin.engines.models import Engine
from kvadmin.fleet.pod import PodConfig
from kvadmin.fleet.tokenizer import Message, encode_chat
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from kvadmin.routing.local_tokenize import tokenize_locally
from kvadmin.routing.tokenize import request_body
from tests.conftest import http_json, local_config
from tests.index import MODEL
from tests.routing.conftest import dead_url, hold, local_pod
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
NO_CHECKS = override_settings(KVADMIN={"TOKENIZER_CHECK_EVERY": 0})

PROMPT = "Routing a long prompt: 毕老师 counts 1 + 1 = 2 and the cache keeps prefixes. " * 6
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is a KV cache?"},
    {"role": "assistant", "content": "Keys and values of past tokens."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "And"}, {"type": "text", "text": "why?"}],
    },
]
KEEP = 16 * 128


def _register(pod: str, url: str, tokenizer: str, kind: str = "vllm") -> None:
    Engine.objects.create(
        pod=pod,
        model=MODEL,
        kind=kind,
        events_endpoint="tcp://127.0.0.1:5557",
        http_base_url=url,
        tokenizer=tokenizer,
    )


def _engine_ids(url: str, kind: str, prompt: str | None = None, messages=None) -> list[int]:
    body = request_body(kind, MODEL, prompt, messages)
    status, answer = http_json(f"{url}/tokenize", body)
    assert status == 200, answer
    return answer["tokens"]


def _pod(kind: str, tokenizer: str) -> PodConfig:
    return local_config(f"{kind}-0.default", kind, model=MODEL, tokenizer=tokenizer)


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_local_ids_are_the_engines_ids_for_text_and_chat(start_fleet, deepseek_v4, kind) -> None:
    url = start_fleet(_pod(kind, deepseek_v4)).pods[0].config.http_url
    flat = [*CHAT[:3], {"role": "user", "content": "And\nwhy?"}]  # as scoring flattens it

    text = tokenize_locally(deepseek_v4, prompt=PROMPT, keep=KEEP)
    chat = tokenize_locally(deepseek_v4, messages=flat, keep=KEEP)

    assert text.tokens == _engine_ids(url, kind, prompt=PROMPT) and not text.estimated
    assert chat.tokens == _engine_ids(url, kind, messages=flat)
    assert chat.count == len(chat.tokens)


def test_a_long_prompt_is_tokenized_in_its_scoring_window(start_fleet, deepseek_v4) -> None:
    pod = start_fleet(_pod("vllm", deepseek_v4)).pods[0]
    rng = random.Random(7)
    words = ["cache", "prefix", "块", "tokens", "1234567", "\n\n", "don't", "GPU", "(x)"]
    prompt = " ".join(rng.choice(words) for _ in range(40_000))

    found = tokenize_locally(deepseek_v4, prompt=prompt, keep=KEEP)

    engine = _engine_ids(pod.config.http_url, "vllm", prompt=prompt)
    assert found.tokens == engine[:KEEP]
    assert found.estimated and abs(found.count - len(engine)) < 0.1 * len(engine)


@NO_CHECKS
def test_scoring_uses_the_local_tokenizer_and_records_it(
    post_score, redis_client, deepseek_v4, start_fleet
) -> None:
    pod = start_fleet(_pod("vllm", deepseek_v4)).pods[0]
    expected = _engine_ids(pod.config.http_url, "vllm", prompt=PROMPT)
    # The engine is gone: ids can only come from the local tokenizer.
    _register(pod.name, dead_url(), deepseek_v4)
    hold(redis_client, pod.name, expected, ["GPU"] * 4)

    status, answer = post_score({"model": MODEL, "prompt": PROMPT})

    assert status == 200, answer
    assert answer["tokenizer"] == "local" and answer["tokens"] == len(expected)
    assert answer["scores"][0]["matched_blocks"] == 4
    assert answer["timings_ms"]["tokenize"] > 0
    status, again = post_score({"model": MODEL, "prompt": PROMPT})
    assert again["tokenizer"] == "cache"


def test_a_chat_the_template_cannot_render_goes_to_the_engine_and_is_counted(
    post_score, redis_client, deepseek_v4, start_fleet
) -> None:
    pod = start_fleet(local_pod("vllm-0.default")).pods[0]  # the toy tokenizer accepts any role
    _register(pod.name, pod.config.http_url, deepseek_v4)
    messages = [{"role": "tool", "content": "42"}, {"role": "user", "content": "and?"}]

    status, answer = post_score({"model": MODEL, "messages": messages})

    assert status == 200, answer
    assert answer["tokenizer"] == f"engine:{pod.name}"
    assert answer["tokens"] == len(encode_chat([Message("tool", "42"), Message("user", "and?")]))
    fallbacks = redis_client.hget(
        families.LOCAL_TOKENIZER_FALLBACKS.key, label_field((MODEL, "template"))
    )
    assert fallbacks == "1"


def _word_tokenizer(path: Path, words: list[str], version: int) -> None:
    """A word-level tokenizer: word i of `words` is id i + 1. `version` moves the file's
    modification time, as an edit a second later would."""
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, "[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(path))
    os.utime(path, ns=(1_700_000_000_000_000_000 + version, 1_700_000_000_000_000_000 + version))


@NO_CHECKS
def test_an_edited_tokenizer_file_is_reloaded(tmp_path, post_score, redis_client) -> None:
    path = tmp_path / "tokenizer.json"
    _word_tokenizer(path, ["kv", "cache"], version=1)
    _register("vllm-0.default", dead_url(), str(path))
    hold(redis_client, "vllm-0.default", [1, 2] * 8, ["GPU"])
    status, first = post_score({"model": MODEL, "prompt": "kv cache " * 8})
    assert status == 200 and first["scores"][0]["matched_blocks"] == 1

    _word_tokenizer(path, ["cache", "kv"], version=2)  # the two words' ids swap

    # Seen once the files are statted again (within files.RECHECK_SECONDS).
    wait_until(
        lambda: tokenize_locally(str(path), prompt="kv cache", keep=KEEP).tokens == [2, 1],
        timeout=10,
        what="the edited tokenizer to be loaded",
    )
    status, second = post_score({"model": MODEL, "prompt": "kv cache " * 8})
    assert second["tokenizer"] == "local"  # not the old file's ids from the token cache
    assert second["scores"] == []
