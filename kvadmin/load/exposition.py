"""What an engine's /metrics says about its load, read with prometheus-client's text parser.

Pure: text in, a `Load` out (or `Unreadable`). The text is untrusted: the caller bounds its
size; a parse failure, a missing gauge or a value that is not a finite non-negative number
makes the whole scrape unreadable, never a partial load.

Samples are matched by their full name (`vllm:prompt_tokens_total`, `..._sum`), whatever the
family's TYPE line says (only their lines are parsed), and summed over label sets: one engine
process labels its series per model_name and engine (data-parallel rank). The cache usage is
a fraction per rank, so it is averaged instead.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

MAX_COUNT: Final = 1e12
"""Above this a gauge or counter is nonsense, not load."""
MAX_SERIES_PER_NAME: Final = 256
"""Label sets of one wanted sample name: a real engine has one per (model, data-parallel
rank). Beyond this the exposition is refused before it is parsed: a hostile one of 1 MiB of
wanted lines would otherwise cost the parser 40 to 75 times a real scrape."""
MAX_LINE: Final = 4096
"""Characters of one wanted sample line (its labels are a model name and a rank)."""


@dataclass(frozen=True, slots=True)
class Names:
    """The sample names of one engine kind; each tuple lists alternatives, the first present
    wins (newer names first)."""

    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_usage: tuple[str, ...]
    counters: dict[str, tuple[str, ...]]
    """Load-hash field -> sample names of the counters kept for fitting the TTFT model."""


NAMES: Final[dict[str, Names]] = {
    # vllm/v1/metrics/loggers.py: gauges per (model_name, engine); kv_cache_usage_perc is a
    # fraction despite its name, gpu_cache_usage_perc its name before vLLM 0.10.
    "vllm": Names(
        running=("vllm:num_requests_running",),
        waiting=("vllm:num_requests_waiting",),
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        counters={
            "prompt_tokens_total": ("vllm:prompt_tokens_total",),
            "prefill_seconds_sum": ("vllm:request_prefill_time_seconds_sum",),
            "prefill_seconds_count": ("vllm:request_prefill_time_seconds_count",),
            "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total",),
            "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total",),
        },
    ),
    # sglang/srt/metrics/collector.py: SchedulerMetricsCollector's gauges and
    # TokenizerMetricsCollector's counters. SGLang has no prefill-time histogram; its time to
    # first token less its queue time (both histograms) is the equivalent.
    "sglang": Names(
        running=("sglang:num_running_reqs",),
        waiting=("sglang:num_queue_reqs",),
        kv_usage=("sglang:token_usage",),
        counters={
            "prompt_tokens_total": ("sglang:prompt_tokens_total",),
            "cached_tokens_total": ("sglang:cached_tokens_total",),
            "ttft_seconds_sum": ("sglang:time_to_first_token_seconds_sum",),
            "ttft_seconds_count": ("sglang:time_to_first_token_seconds_count",),
            "queue_seconds_sum": ("sglang:queue_time_seconds_sum",),
        },
    ),
}


class Unreadable(ValueError):
    """The exposition does not give the engine's load; `reason` is a short label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Load:
    running: int
    waiting: int
    kv_usage: float
    counters: dict[str, float]
    """Only the counters the engine exposes."""


def parse_load(kind: str, text: str) -> Load:
    """The load in one /metrics exposition of an engine of `kind` ("vllm" or "sglang")."""
    names = NAMES[kind]
    wanted = {*names.running, *names.waiting, *names.kv_usage}
    wanted.update(name for alternatives in names.counters.values() for name in alternatives)
    values: dict[str, list[float]] = {}
    kept = _only(text, wanted)
    try:
        for family in text_string_to_metric_families(kept):
            for sample in family.samples:
                if sample.name in wanted:
                    values.setdefault(sample.name, []).append(float(sample.value))
    except Exception as error:  # the parser raises ValueError, IndexError, KeyError, ...
        raise Unreadable("unparsable", f"not Prometheus text: {error}") from None
    for name, found in values.items():
        if any(not math.isfinite(v) or v < 0 or v > MAX_COUNT for v in found):
            raise Unreadable("bad_value", f"{name} is not a finite count: {found[:4]}")
    running = _first(values, names.running, sum)
    waiting = _first(values, names.waiting, sum)
    kv_usage = _first(values, names.kv_usage, lambda found: sum(found) / len(found))
    counters = {
        field: total
        for field, alternatives in names.counters.items()
        if (total := _optional(values, alternatives, sum)) is not None
    }
    return Load(round(running), round(waiting), min(kv_usage, 1.0), counters)


def _only(text: str, wanted: set[str]) -> str:
    """The sample lines of the wanted names, nothing else: the parser takes about 0.8 s for
    1 MiB of text, and a real engine's hundreds of other series (histogram buckets mostly)
    would cost every scrape tens of milliseconds. Without their TYPE lines the samples parse as
    untyped, under their full names, which is how they are matched. Unreadable beyond
    MAX_SERIES_PER_NAME lines of one name or a line beyond MAX_LINE, before any parsing."""
    lines = []
    series: dict[str, int] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            series[name] = count = series.get(name, 0) + 1
            if count > MAX_SERIES_PER_NAME:
                raise Unreadable("unparsable", f"more than {MAX_SERIES_PER_NAME} {name} series")
            if len(line) > MAX_LINE:
                raise Unreadable("unparsable", f"a {name} line of {len(line)} characters")
            lines.append(line)
    return "\n".join(lines) + "\n"


def _first(
    values: dict[str, list[float]],
    alternatives: tuple[str, ...],
    combine: Callable[[list[float]], float],
) -> float:
    found = _optional(values, alternatives, combine)
    if found is None:
        raise Unreadable("missing", f"no {' or '.join(alternatives)} sample")
    return found


def _optional(
    values: dict[str, list[float]],
    alternatives: tuple[str, ...],
    combine: Callable[[list[float]], float],
) -> float | None:
    return next((combine(values[name]) for name in alternatives if name in values), None)
