"""A simulated pod configured with a real tokenizer tokenizes with it, as vLLM and SGLang do:
the prompt with the post-processor's special tokens, chat through the model's template."""

from tokenizers import Tokenizer

from kvadmin.model_tokenizer.bundled import deepseek_v4_files
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config

PROMPT = "Hello! 毕老师！1 + 1 = 2, and the cache holds prefixes."


def test_a_pod_with_the_deepseek_tokenizer_answers_its_real_ids(
    start_fleet: StartFleet, deepseek_v4: str
) -> None:
    pod = start_fleet(local_config(tokenizer=deepseek_v4)).pods[0]
    real = Tokenizer.from_file(str(deepseek_v4_files() / "tokenizer.json"))
    body = {"model": pod.model, "prompt": PROMPT, "add_special_tokens": True}
    status, answer = http_json(f"{pod.config.http_url}/tokenize", body)
    assert status == 200
    assert answer["tokens"] == real.encode(PROMPT).ids
    # The README of the package gives these ids for its example's first words.
    assert answer["tokens"][:3] == [19923, 3, 223]


def test_its_chat_template_writes_deepseeks_special_tokens(
    start_fleet: StartFleet, deepseek_v4: str
) -> None:
    pod = start_fleet(local_config("sglang-0.default", "sglang", tokenizer=deepseek_v4)).pods[0]
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    body = {"model": pod.model, "messages": messages, "add_special_tokens": False}
    _, answer = http_json(f"{pod.config.http_url}/tokenize", body)
    real = Tokenizer.from_file(str(deepseek_v4_files() / "tokenizer.json"))
    text = "<｜begin▁of▁sentence｜>Be terse.<｜User｜>Hi<｜Assistant｜></think>"
    assert answer["tokens"] == real.encode(text, add_special_tokens=False).ids


def test_a_role_the_template_refuses_is_a_400(start_fleet: StartFleet, deepseek_v4: str) -> None:
    pod = start_fleet(local_config(tokenizer=deepseek_v4)).pods[0]
    body = {"model": pod.model, "messages": [{"role": "tool", "content": "42"}]}
    status, answer = http_json(f"{pod.config.http_url}/tokenize", body)
    assert status == 400 and "unsupported role: tool" in answer["error"]["message"]
