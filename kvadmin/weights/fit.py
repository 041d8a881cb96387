"""Fitting the TTFT parameters from the engines' own counters: the "Fit from engine metrics"
button of /weights/.

The load scraper keeps a sample of each engine's prefill counters every LOAD_FIT_SAMPLE_SECONDS
(`keys.load_fit_samples_key`). Between two consecutive samples of one engine (a window), the
counters' differences give the requests prefilled (n), the prompt tokens it computed (prompt
tokens less prefix-cache hits: u) and the time spent prefilling them (y):

- vLLM: `vllm:request_prefill_time_seconds` (sum, count), `vllm:prompt_tokens_total`,
  `vllm:prefix_cache_hits_total`;
- SGLang: `sglang:time_to_first_token_seconds` (sum, count) less `sglang:queue_time_seconds`
  (sum), `sglang:prompt_tokens_total`, `sglang:cached_tokens_total`. An SGLang without the
  queue-time histogram is skipped: its time to first token includes queueing.

The prefill model (scoring.ttft) says a request's prefill takes T0 + t_tok * slowdown * u, with
slowdown = 1 + decode_slowdown * running. Per window, the mean per request is a point
(x = u / n * slowdown, y / n); a least-squares line through a model's points has slope t_tok
and intercept T0 (`statistics.linear_regression`, the standard library's: two unknowns need no
more). T0 is one parameter for every model: it is the request-weighted mean of the models'
intercepts, and each model's speed is then fitted again through that T0. `kappa` and
`decode_slowdown` are not in the counters and stay as the draft has them. Lower-tier hits
count as cached (vLLM counts connector hits apart), which makes a fitted speed slightly high
on pods that reload much.

Windows where a counter went down (the engine restarted) or nothing was prefilled are skipped.
Nothing is saved: the fitted values fill the editor, to preview and save like any edit.
"""

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import redis

from scoring import keys
from scoring.ttft import MAX_SECONDS, MAX_TOKENS_PER_S, TtftParameters

MIN_WINDOWS = 3
"""Windows a model needs before its points fit a line (T0 and speed); with fewer (at least 1)
only its speed is fitted, through the pooled or current T0."""


_FLAT = "the prefill time does not grow with the tokens computed"


@dataclass(frozen=True, slots=True)
class Window:
    """One engine between two consecutive samples."""

    requests: float
    computed_tokens: float
    prefill_s: float
    running: float
    """The mean of the two samples' running requests."""


@dataclass(frozen=True, slots=True)
class ModelFit:
    model: str
    pods: int
    windows: int
    requests: int
    tokens_per_s: float | None
    """None: not fitted (`note` says why)."""
    intercept_s: float | None = None
    """The model's own T0, when it had enough windows."""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Fit:
    parameters: TtftParameters
    """The draft's parameters with the fitted T0 and speeds."""
    models: list[ModelFit]
    first_token_s: float | None
    """The pooled T0; None when no model had enough windows (T0 kept)."""
    skipped: list[str] = field(default_factory=list)
    """Engines without usable samples, and why."""

    @property
    def fitted(self) -> bool:
        return any(model.tokens_per_s is not None for model in self.models)


def windows(kind: str, samples: Iterable[tuple[float, Mapping[str, float]]]) -> list[Window]:
    """The windows between consecutive `samples` (oldest first) of an engine of `kind`."""
    ordered = sorted(samples, key=lambda sample: sample[0])
    found = []
    for (_, older), (_, newer) in zip(ordered, ordered[1:], strict=False):
        window = _window(kind, older, newer)
        if window is not None:
            found.append(window)
    return found


def _window(kind: str, older: Mapping[str, float], newer: Mapping[str, float]) -> Window | None:
    def delta(name: str) -> float | None:
        if name not in older or name not in newer:
            return None
        return newer[name] - older[name]

    if kind == "vllm":
        requests, prefill = delta("prefill_seconds_count"), delta("prefill_seconds_sum")
        hits = delta("prefix_cache_hits_total")
    else:
        requests, ttft = delta("ttft_seconds_count"), delta("ttft_seconds_sum")
        queue = delta("queue_seconds_sum")
        prefill = ttft - queue if ttft is not None and queue is not None else None
        hits = delta("cached_tokens_total")
    prompt = delta("prompt_tokens_total")
    counted = (requests, prefill, prompt, hits if hits is not None else 0.0)
    if any(value is None or value < 0 for value in counted) or not requests:
        return None  # a counter missing, or reset by a restart, or nothing prefilled
    computed = max(prompt - (hits or 0.0), 0.0)  # type: ignore[operator]
    running = (older.get("running", 0.0) + newer.get("running", 0.0)) / 2
    return Window(requests, computed, prefill, running)  # type: ignore[arg-type]


def fit(base: TtftParameters, by_model: Mapping[str, tuple[int, list[Window]]]) -> Fit:
    """Fit T0 and each model's speed from its windows (model -> (pods, windows))."""
    points = {model: _points(found, base.decode_slowdown) for model, (_, found) in by_model.items()}
    intercepts, flat = {}, set()
    for model, (xs, ys, ns) in points.items():
        line = _line(xs, ys)
        if line is not None and line[0] <= 0:
            flat.add(model)
        elif line is not None and line[1] >= 0:
            intercepts[model] = (line[1], sum(ns))
    pooled = None
    if intercepts:
        total = sum(n for _, n in intercepts.values())
        pooled = _bounded(sum(b * n for b, n in intercepts.values()) / total, 0.0, MAX_SECONDS)
    first_token_s = pooled if pooled is not None else base.first_token_s
    speeds = dict(base.prefill_tokens_per_s)
    models = []
    for model, (xs, ys, ns) in sorted(points.items()):
        pods = by_model[model][0]
        speed, note = (None, _FLAT) if model in flat else _speed(xs, ys, first_token_s)
        if speed is not None:
            speeds[model] = speed
        own = intercepts.get(model)
        models.append(
            ModelFit(
                model,
                pods,
                len(xs),
                round(sum(ns)),
                speed,
                round(own[0], 4) if own else None,
                note,
            )
        )
    parameters = replace(
        base,
        first_token_s=round(first_token_s, 4),
        prefill_tokens_per_s=tuple(sorted(speeds.items())),
    )
    return Fit(parameters, models, round(pooled, 4) if pooled is not None else None)


def _points(found: list[Window], slowdown: float) -> tuple[list[float], list[float], list[float]]:
    xs, ys, ns = [], [], []
    for window in found:
        xs.append(window.computed_tokens / window.requests * (1 + slowdown * window.running))
        ys.append(window.prefill_s / window.requests)
        ns.append(window.requests)
    return xs, ys, ns


def _line(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """(slope, intercept) of the least-squares line, when there are enough distinct points."""
    if len(xs) < MIN_WINDOWS or len(set(xs)) < 2:
        return None
    return statistics.linear_regression(xs, ys)


def _speed(xs: list[float], ys: list[float], first_token_s: float) -> tuple[float | None, str]:
    """Tokens per second through the fixed intercept `first_token_s`."""
    if not xs:
        return None, "no window with prefills: send it traffic and wait a sample interval"
    if not any(xs):
        return None, "every prompt token was cached: nothing to time"
    above = [y - first_token_s for y in ys]
    if len(xs) == 1:
        slope = above[0] / xs[0]
    else:
        slope, _ = statistics.linear_regression(xs, above, proportional=True)
    if not slope > 0 or not math.isfinite(1 / slope):
        return None, _FLAT
    speed = 1 / slope
    if speed > MAX_TOKENS_PER_S:
        return None, f"{speed:.3g} tokens/s is beyond any engine"
    note = "" if len(xs) >= MIN_WINDOWS else f"only {len(xs)} window(s): T0 not fitted from it"
    return float(max(round(speed), 1)), note


def _bounded(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def read_samples(
    client: redis.Redis, pods: list[str]
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """Each pod's kept samples, oldest first; unreadable ones are skipped. One round trip."""
    pipeline = client.pipeline(transaction=False)
    for pod in pods:
        pipeline.lrange(keys.load_fit_samples_key(pod), 0, -1)
    return {
        pod: [sample for text in reversed(texts) if (sample := _sample(text)) is not None]
        for pod, texts in zip(pods, pipeline.execute(), strict=True)
    }


def _sample(text: str) -> tuple[float, dict[str, float]] | None:
    at, _, payload = text.partition(" ")
    try:
        when, data = float(at), json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    counters = {
        name: float(value)
        for name, value in data.items()
        if isinstance(value, int | float) and math.isfinite(value)
    }
    return when, counters


def fit_from_engines(
    client: redis.Redis, engines: Iterable[tuple[str, str, str]], base: TtftParameters
) -> Fit:
    """Fit from the samples of `engines` ((pod, model, kind) each)."""
    engines = list(engines)
    samples = read_samples(client, [pod for pod, _, _ in engines])
    by_model: dict[str, tuple[int, list[Window]]] = {}
    skipped = []
    for pod, model, kind in engines:
        found = windows(kind, samples[pod])
        if not found:
            why = "fewer than two samples" if len(samples[pod]) < 2 else "no usable window"
            if kind == "sglang" and all("queue_seconds_sum" not in s for _, s in samples[pod]):
                why = "no queue-time histogram (sglang:queue_time_seconds)"
            skipped.append(f"{pod}: {why}")
            continue
        pods, kept = by_model.get(model, (0, []))
        by_model[model] = (pods + 1, kept + found)
    result = fit(base, by_model)
    return replace(result, skipped=skipped)
