"""`/v1/completions` and `/v1/chat/completions` serve against the pod's cache and report the real
hit in `usage.prompt_tokens_details.cached_tokens`, split by medium in the kvadmin extension."""

from kvadmin.fleet.tokenizer import encode
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config

SYSTEM = {"role": "system", "content": "You answer questions about caches. " * 30}


def _chat(model: str, question: str) -> dict:
    return {"model": model, "messages": [SYSTEM, {"role": "user", "content": question}]}


def test_a_repeated_prefix_reports_cached_tokens_like_vllm(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    url = f"{pod.config.http_url}/v1/chat/completions"
    status, first = http_json(url, _chat(pod.model, "What is a block?"))
    assert status == 200
    assert first["object"] == "chat.completion"
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    _, second = http_json(url, _chat(pod.model, "And a tier?"))
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and cached % 16 == 0
    assert second["kvadmin"]["cached_tokens_by_medium"] == {"GPU": cached}
    assert second["kvadmin"]["pod"] == "vllm-0.default"
    assert second["choices"][0]["message"]["role"] == "assistant"
    assert second["usage"]["completion_tokens"] == 16


def test_a_text_completion_hits_what_an_earlier_one_stored(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config("sglang-0.default", "sglang")).pods[0]
    url = f"{pod.config.http_url}/v1/completions"
    prompt = "The same long document. " * 20
    tokens = encode(prompt)
    _, first = http_json(url, {"prompt": prompt, "max_tokens": 4})
    assert first["object"] == "text_completion"
    assert first["usage"]["prompt_tokens"] == len(tokens)
    assert first["usage"]["completion_tokens"] == 4
    _, second = http_json(url, {"prompt": prompt + " Question?", "max_tokens": 4})
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == len(tokens) // 16 * 16
    _, by_ids = http_json(url, {"prompt": tokens + [1, 2], "max_tokens": 1})
    assert by_ids["usage"]["prompt_tokens_details"]["cached_tokens"] == len(tokens) // 16 * 16


def test_a_cpu_hit_is_reported_per_medium(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config(gpu_blocks=4, cpu_blocks=16)).pods[0]
    url = f"{pod.config.http_url}/v1/completions"
    prompt = list(range(1, 65))
    http_json(url, {"prompt": prompt})
    http_json(url, {"prompt": list(range(1000, 1064))})  # evicts the first prompt to CPU
    _, again = http_json(url, {"prompt": prompt + [7]})
    assert again["kvadmin"]["cached_tokens_by_medium"] == {"CPU": 64}
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 64


def test_reset_prefix_cache_empties_the_pod(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    base = pod.config.http_url
    http_json(f"{base}/v1/completions", {"prompt": list(range(1, 40))})
    assert pod.contents()
    assert http_json(f"{base}/reset_prefix_cache", {})[0] == 200
    assert pod.contents() == set()


def test_a_prompt_beyond_the_context_length_is_refused(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config(max_model_len=32)).pods[0]
    status, answer = http_json(f"{pod.config.http_url}/v1/completions", {"prompt": list(range(40))})
    assert status == 400
    assert "maximum context length is 32" in answer["error"]["message"]
