"""Reading an engine's load from its /metrics text: real engines' names and label sets, and
what an untrusted exposition may hold instead."""

import pytest

from kvadmin.load.exposition import Unreadable, parse_load

VLLM_DP2 = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 24.0
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:request_prefill_time_seconds_count{engine="0",model_name="m"} 4.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 0.8
"""


def test_vllm_sums_requests_over_ranks_and_averages_the_cache_usage() -> None:
    load = parse_load("vllm", VLLM_DP2)

    assert (load.running, load.waiting, load.kv_usage) == (4, 2, 0.375)
    assert load.counters == {
        "prompt_tokens_total": 1024.0,
        "prefill_seconds_sum": 0.8,
        "prefill_seconds_count": 4.0,
    }


def test_older_vllm_names_its_cache_usage_gpu_cache_usage_perc() -> None:
    text = VLLM_DP2.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")

    assert parse_load("vllm", text).kv_usage == 0.375


def test_sglang_names() -> None:
    text = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 7.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 5.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 8.128902e+06
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m"} 100.0
"""
    load = parse_load("sglang", text)

    assert (load.running, load.waiting, load.kv_usage) == (7, 5, 0.28)
    assert load.counters == {"prompt_tokens_total": 8128902.0, "cached_tokens_total": 100.0}


def test_sglang_time_to_first_token_and_queue_time_are_kept_for_the_ttft_fit() -> None:
    """SGLang has no prefill-time histogram: its TTFT less its queue time stands for it."""
    text = """sglang:num_running_reqs{model_name="m"} 1.0
sglang:num_queue_reqs{model_name="m"} 0.0
sglang:token_usage{model_name="m"} 0.1
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 9.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 2.5
sglang:time_to_first_token_seconds_count{model_name="m"} 9.0
sglang:queue_time_seconds_sum{model_name="m"} 0.5
sglang:queue_time_seconds_count{model_name="m"} 9.0
"""
    assert parse_load("sglang", text).counters == {
        "ttft_seconds_sum": 2.5,
        "ttft_seconds_count": 9.0,
        "queue_seconds_sum": 0.5,
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("vllm:num_requests_running{ 1\n", "unparsable"),
        ("vllm:num_requests_running abc\n", "unparsable"),
        ("\x00\xff garbage {{{\n", "missing"),
        ('vllm:num_requests_running{a="1" 1\n' + VLLM_DP2, "unparsable"),
        (VLLM_DP2.replace("3.0", "NaN"), "bad_value"),
        (VLLM_DP2.replace("3.0", "-3.0"), "bad_value"),
        (VLLM_DP2.replace("3.0", "+Inf"), "bad_value"),
        (VLLM_DP2.replace("3.0", "1e300"), "bad_value"),
        (VLLM_DP2.replace("vllm:num_requests_waiting", "vllm:other"), "missing"),
        ("", "missing"),
        (VLLM_DP2.replace("vllm:", "sglang:"), "missing"),
    ],
)
def test_an_exposition_without_a_readable_load_is_refused_whole(text: str, reason: str) -> None:
    with pytest.raises(Unreadable) as refused:
        parse_load("vllm", text)

    assert refused.value.reason == reason


def _hostile(series: int) -> str:
    """VLLM_DP2 and `series` more label sets of one wanted gauge (about 1 MiB at 16,000)."""
    extra = "".join(
        f'vllm:num_requests_running{{engine="{n}",model_name="m"}} 0.0\n' for n in range(series)
    )
    return VLLM_DP2 + extra


def test_too_many_series_of_a_wanted_name_are_refused_before_parsing() -> None:
    hostile = _hostile(16_000)
    assert len(hostile) > 900_000
    with pytest.raises(Unreadable) as refused:
        parse_load("vllm", hostile)
    assert refused.value.reason == "unparsable"
    assert "series" in str(refused.value)


def test_a_data_parallel_engines_series_are_within_the_cap() -> None:
    assert parse_load("vllm", _hostile(200)).running == 4


def test_a_wanted_line_beyond_the_longest_label_set_is_refused() -> None:
    long_line = f'vllm:num_requests_running{{model_name="{"m" * 10_000}"}} 1.0\n'
    with pytest.raises(Unreadable) as refused:
        parse_load("vllm", VLLM_DP2 + long_line)
    assert refused.value.reason == "unparsable"
