"""A near-instant pod (`prompt_window`) serves and caches only a long prompt's first tokens,
and reports the prompt's count estimated from them."""

from kvadmin.fleet.tokenizer import encode
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config


def test_it_caches_only_the_window_and_estimates_the_count(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config(prompt_window=64)).pods[0]
    url = f"{pod.config.http_url}/v1/completions"
    prompt = "a long shared document about caches " * 400
    whole = len(encode(prompt))
    _, first = http_json(url, {"prompt": prompt, "max_tokens": 4})
    assert abs(first["usage"]["prompt_tokens"] - whole) <= whole * 0.1
    _, second = http_json(url, {"prompt": prompt + " and a question?", "max_tokens": 4})
    assert 0 < second["usage"]["prompt_tokens_details"]["cached_tokens"] <= 64
