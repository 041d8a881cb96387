"""A timed simulated pod: a FIFO prefill queue timed by scoring.ttft's model, requests that keep
running (and holding KV memory) while they decode, and the engines' metric families on /metrics."""

import concurrent.futures as cf
import json
import time
import urllib.request

import pytest

from kvadmin.fleet.cache import CPU, GPU
from kvadmin.load.exposition import parse_load
from scoring.ttft import TtftParameters
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config
from tests.waiting import patient, wait_until

# 0.05 s per request plus 1 ms per uncached token: easy to tell apart from scheduling noise.
SLOW = TtftParameters(first_token_s=0.05, default_prefill_tokens_per_s=1000.0, decode_slowdown=0)


def _prompt(seed: int, blocks: int) -> list[int]:
    return [seed * 1000 + i for i in range(blocks * 16)]


def _complete(url: str, prompt: list[int], max_tokens: int = 16) -> dict:
    status, body = http_json(f"{url}/v1/completions", {"prompt": prompt, "max_tokens": max_tokens})
    assert status == 200, body
    return body


def _metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=patient(5)) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()


def _fault(url: str, action: str) -> None:
    status, body = http_json(f"{url}/admin/fault", {"action": action})
    assert status == 200, body


def _lined_up(pool: cf.Executor, url: str, requests: list[tuple[list[int], int]]) -> list[dict]:
    """Send the requests to a paused pod one by one, each once the one before is in line (so
    the line's order is the list's), then resume the pod; their answers, in that order."""
    _fault(url, "pause")
    answers = []
    for n, (prompt, max_tokens) in enumerate(requests, 1):
        answers.append(pool.submit(_complete, url, prompt, max_tokens))
        wait_until(lambda n=n: parse_load("vllm", _metrics(url)).waiting == n, what=f"{n} in line")
    _fault(url, "resume")
    return [answer.result() for answer in answers]


def test_concurrent_requests_wait_in_a_fifo_prefill_queue(start_fleet: StartFleet) -> None:
    config = local_config(time_scale=1.0, prefill=SLOW, decode_seconds=0.0)
    url = start_fleet(config).configs[0].http_url
    prompts = [_prompt(seed, 4) + [7] for seed in range(4)]  # 65 tokens, nothing cached

    with cf.ThreadPoolExecutor(4) as pool:
        answers = _lined_up(pool, url, [(prompt, 16) for prompt in prompts])

    prefill = [a["kvadmin"]["prefill_ms"] for a in answers]
    queued = [a["kvadmin"]["queued_ms"] for a in answers]
    assert prefill == pytest.approx([50 + 65] * 4)  # T0 + 65 tokens at 1 ms
    # One prefill at a time, first come first served: each waited (from before the pod
    # resumed) for every prefill ahead of it in line (0.002 ms: the answers' rounding).
    for k, wait in enumerate(queued):
        assert wait >= sum(prefill[:k]) - 0.002, queued


def test_cached_tokens_are_the_hit_when_the_prefill_starts(start_fleet: StartFleet) -> None:
    config = local_config(time_scale=1.0, prefill=SLOW, decode_seconds=0.0)
    url = start_fleet(config).configs[0].http_url
    shared = _prompt(1, 4)

    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(_complete, url, shared + [1])
        wait_until(lambda: "} 1.0" in _waiting_line(url), what="the first to run")
        second = pool.submit(_complete, url, shared + [2])
        answers = [first.result(), second.result()]

    # The second was queued behind the first, so it found the shared prefix cached.
    assert [a["usage"]["prompt_tokens_details"]["cached_tokens"] for a in answers] == [0, 64]
    assert answers[1]["kvadmin"]["cached_tokens_by_medium"] == {GPU: 64}
    assert answers[1]["kvadmin"]["prefill_ms"] == pytest.approx(50 + 1)
    assert answers[1]["kvadmin"]["queued_ms"] > 0


def _waiting_line(url: str) -> str:
    """The running-requests line: the first request is in prefill."""
    return next(
        line for line in _metrics(url).splitlines() if line.startswith("vllm:num_requests_running")
    )


def test_a_lower_tier_hit_costs_its_reload_fraction(start_fleet: StartFleet) -> None:
    config = local_config(
        time_scale=1.0, prefill=SLOW, decode_seconds=0.0, gpu_blocks=4, cpu_blocks=16
    )
    url = start_fleet(config).configs[0].http_url
    _complete(url, _prompt(1, 4) + [1])
    _complete(url, _prompt(2, 4) + [1])  # pushes the first prompt's blocks to CPU

    answer = _complete(url, _prompt(1, 4) + [2])

    assert answer["kvadmin"]["cached_tokens_by_medium"] == {CPU: 64}
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 64
    # CPU is worth 0.8 of GPU: its 64 tokens cost 0.2 of their prefill, plus 1 new token.
    assert answer["kvadmin"]["prefill_ms"] == pytest.approx(50 + 0.2 * 64 + 1)


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_running_requests_hold_kv_memory_on_metrics(start_fleet: StartFleet, kind: str) -> None:
    config = local_config(
        name=f"{kind}-0.default",
        kind=kind,
        time_scale=1.0,
        prefill=TtftParameters(first_token_s=0.001),
        decode_seconds=30.0,
        gpu_blocks=100,
    )
    url = start_fleet(config).configs[0].http_url
    for seed in range(3):
        _complete(url, _prompt(seed, 4), max_tokens=16)  # 5 blocks held each while decoding

    load = parse_load(kind, _metrics(url))

    assert (load.running, load.waiting) == (3, 0)
    assert load.kv_usage == pytest.approx(15 / 100)
    assert load.counters["prompt_tokens_total"] == 3 * 64
    running = "vllm:num_requests_running" if kind == "vllm" else "sglang:num_running_reqs"
    assert running in _metrics(url)


def test_a_full_gpu_makes_the_next_request_wait_for_memory(start_fleet: StartFleet) -> None:
    parameters = TtftParameters(first_token_s=0.001)
    config = local_config(time_scale=1.0, prefill=parameters, decode_seconds=0.5, gpu_blocks=8)
    url = start_fleet(config).configs[0].http_url

    with cf.ThreadPoolExecutor(2) as pool:
        # The first holds all 8 blocks for 0.5 s after its prefill; the second needs 2.
        first, second = _lined_up(pool, url, [(_prompt(1, 4), 64), (_prompt(2, 1), 16)])

    # The second, in line before the pod resumed, waited for the first's prefill and decode.
    assert second["kvadmin"]["queued_ms"] >= first["kvadmin"]["prefill_ms"] + 500 - 0.002
    # ... and then prefilled alone: with the first still running it would be slowed down.
    alone = parameters.first_token_s + 16 / parameters.default_prefill_tokens_per_s
    assert second["kvadmin"]["prefill_ms"] == pytest.approx(alone * 1000)


def test_requests_behind_one_prompt_hold_its_blocks_once(start_fleet: StartFleet) -> None:
    parameters = TtftParameters(first_token_s=0.001, decode_slowdown=0.5)
    config = local_config(time_scale=1.0, prefill=parameters, decode_seconds=0.5, gpu_blocks=8)
    url = start_fleet(config).configs[0].http_url
    prompt = _prompt(1, 6)

    with cf.ThreadPoolExecutor(2) as pool:
        # The first holds 7 blocks (6 of its prompt, 1 of its answer) while it decodes; the
        # second shares the 6 and needs 1 more: 8 fit, as vLLM's prefix caching fits them.
        first, second = _lined_up(pool, url, [(prompt, 16), (prompt, 16)])

    # The second prefilled beside the first (slowed down by it), not after its decode.
    uncached = len(prompt) - second["usage"]["prompt_tokens_details"]["cached_tokens"]
    beside = parameters.first_token_s + 1.5 * uncached / parameters.default_prefill_tokens_per_s
    assert uncached == 16
    assert second["kvadmin"]["prefill_ms"] == pytest.approx(beside * 1000)


def test_the_instant_pod_answers_at_once_and_counts_its_work(start_fleet: StartFleet) -> None:
    url = start_fleet(local_config()).configs[0].http_url

    _complete(url, _prompt(1, 4) + [1])
    answer = _complete(url, _prompt(1, 4) + [2])

    assert (answer["kvadmin"]["queued_ms"], answer["kvadmin"]["prefill_ms"]) == (0, 0)
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 64
    load = parse_load("vllm", _metrics(url))
    assert (load.running, load.waiting, load.kv_usage) == (0, 0, 0.0)
    assert load.counters["prompt_tokens_total"] == 130
    assert load.counters["prefix_cache_hits_total"] == 64
    assert load.counters["prefill_seconds_count"] == 2


def test_slow_metrics_delays_only_the_metrics(start_fleet: StartFleet) -> None:
    url = start_fleet(local_config()).configs[0].http_url
    delay = patient(4)  # long beside what a completion takes, however busy the machine
    status, _ = http_json(f"{url}/admin/fault", {"action": "slow_metrics", "delay": delay})
    assert status == 200

    started = time.monotonic()
    _complete(url, _prompt(1, 1))
    assert time.monotonic() - started < delay  # not the delay
    started = time.monotonic()
    _metrics(url)
    assert time.monotonic() - started >= delay
    status, body = http_json(f"{url}/admin/fault", {"action": "slow_metrics", "delay": -1})
    assert status == 400, json.dumps(body)
