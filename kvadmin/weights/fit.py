"""Fitting the TTFT parameters from the engines' own counters: what the "Fit from engine
metrics" button of /weights/ fills the editor with, and what calibration (kvadmin.weights.
calibration) steps the active version towards.

The load scraper keeps a sample of each engine's prefill counters every LOAD_FIT_SAMPLE_SECONDS
(`keys.load_fit_samples_key`). Between two consecutive samples of one engine (a window), the
counters' differences give the requests prefilled (n), the prompt tokens the GPU computed (u),
the lower-tier hits it reloaded (l) and the time spent prefilling them (y):

- vLLM: `vllm:request_prefill_time_seconds` (sum, count), `vllm:prompt_tokens_total`,
  `vllm:prefix_cache_hits_total` (GPU hits) and `vllm:external_prefix_cache_hits_total` (the
  KV connector's hits: CPU offloading, LMCache), u = prompt - GPU hits - connector hits;
- SGLang: `sglang:time_to_first_token_seconds` (sum, count) less `sglang:queue_time_seconds`
  (sum), `sglang:prompt_tokens_total`, `sglang:cached_tokens_total` (every source), of which
  those labelled `cache_source` other than `device` (host memory, storage) are the lower-tier
  hits. An SGLang without the queue-time histogram is skipped: its TTFT includes queueing.

Counting lower-tier hits apart is what keeps the fitted speed the GPU's: counted as computed
tokens, cheap reloads look like fast prefill (4-29% too fast, issue 33).

The prefill model (scoring.ttft) says a request's prefill takes T0 + t_tok * slowdown *
(u + r * l), with slowdown = 1 + decode_slowdown * running and r the reload fraction (1 - the
lower tier's weight). Per window the mean per request is a point (x = (u + r l) / n * slowdown,
y / n), and a line through a pod's points has slope t_tok and intercept T0.

Robust to broken and hostile engines (issue 34 item 7):
- the line is Theil-Sen's (the median of pairwise slopes, then the median intercept), so a
  minority of outlying windows does not move it, and every window is one point: an engine's
  self-reported request counts turn its sums into means, never into weight;
- windows past a plausible bound (`PLAUSIBLE`: request rate, mean prefill, tokens per second,
  prefill seconds per wall second) are refused and counted;
- each pod's figures come from its own windows, each model's from its own pods' windows (a
  model is fitted through its own T0 when it has one), and the pooled T0 (for models and pods
  without enough windows) is the median of the models' own T0s, each model weighing its
  registered pod count: no model moves another's parameters, and one moves the pooled T0 only
  within the others' range unless it holds half the fleet.

Delivered outcomes (kvadmin.weights.evidence: each a window of one request) are evidence too,
weighed so that volume buys no weight: a pod's figures are the median of one line from its
engine's windows and one line per requester from the outcomes it reported for the pod. A
requester flooding outcomes (or reporting wrong times) moves a pod no further than one vote
among its sources, and moves no pod it was not routed to.

`kappa` and `decode_slowdown` are not in the counters and stay as the base has them. The reload
fraction measured per model is shown beside the fit; the tier weights stay the operator's (they
are kthena's scoring contract too). Windows where a counter went down (the engine restarted) or
nothing was prefilled are skipped.
"""

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import redis

from scoring import keys
from scoring.ttft import MAX_TOKENS_PER_S, TtftParameters

MIN_WINDOWS: Final = 3
"""Windows a line needs (T0 and speed); with fewer (at least 1) only a speed is fitted, through
the model's or the pooled T0."""
MAX_POINTS: Final = 60
"""Theil-Sen's pairs grow with the square of the points: the newest this many per line (a
minute of one-second windows: a line follows a pod that changed within a minute, and costs
about a millisecond)."""
INLIER_TOLERANCE: Final = 0.25
"""A window within this fraction of the line's prediction (or 2 ms) is an inlier."""
MAX_FIRST_TOKEN_S: Final = 1.0
"""A fitted T0 above this is not scheduling and one decode step: the line is refused."""
DEFAULT_RELOAD_FRACTION: Final = 0.2
"""What reloading a lower-tier hit costs, as a fraction of computing it (1 - host memory's
0.8) when the base says nothing better."""


@dataclass(frozen=True, slots=True)
class Plausible:
    """Bounds past which an engine's counters describe no engine (a window is refused)."""

    requests_per_s: float = 10_000.0
    prefill_s_per_request: float = 60.0
    tokens_per_s: float = MAX_TOKENS_PER_S
    prefill_s_per_s: float = 4096.0
    """Prefill seconds per wall second: the prefills one engine overlaps in its batches."""


PLAUSIBLE: Final = Plausible()

_FLAT = "the prefill time does not grow with the tokens computed"


@dataclass(frozen=True, slots=True)
class Window:
    """One engine between two consecutive samples."""

    requests: float
    computed_tokens: float
    """Prompt tokens the GPU computed (every hit, GPU or lower tier, left out)."""
    prefill_s: float
    running: float
    """The mean of the two samples' running requests."""
    lower_hits: float = 0.0
    """Prompt tokens reloaded from a lower tier (vLLM connector, SGLang host or storage)."""
    seconds: float = 0.0
    """Wall time between the two samples."""


@dataclass(frozen=True, slots=True)
class Line:
    """A robust fit: T0, tokens per second, and how well the windows follow it."""

    first_token_s: float
    tokens_per_s: float
    windows: int
    confidence: float
    """Inlier fraction (within INLIER_TOLERANCE) times min(1, windows / (2 * MIN_WINDOWS))."""
    error: float
    """Median abs(predicted - measured) / measured over the windows: the fit's quality."""


@dataclass(frozen=True, slots=True)
class PodFit:
    pod: str
    model: str
    line: Line | None
    """None: too few windows for a line of its own (the model's figures apply)."""
    outcomes: int = 0
    """Delivered outcomes among the line's windows."""
    sources: int = 0
    """Lines that voted: the engine's and one per requester that reported outcomes."""


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
    confidence: float = 0.0
    error: float | None = None
    reload_fraction: float | None = None
    """The measured cost of a lower-tier hit, as a fraction of computing it (None: no
    window with lower-tier hits)."""
    outcomes: int = 0
    """Delivered outcomes in its pods' lines (beside the engines' `windows`)."""


@dataclass(frozen=True, slots=True)
class Fit:
    parameters: TtftParameters
    """The base parameters with the fitted T0, speeds and pod fits."""
    models: list[ModelFit]
    first_token_s: float | None
    """The pooled T0; None when no model had enough windows (T0 kept)."""
    skipped: list[str] = field(default_factory=list)
    """Engines without usable samples, and why."""
    pods: list[PodFit] = field(default_factory=list)
    refused: int = 0
    """Windows refused as implausible."""

    @property
    def fitted(self) -> bool:
        return any(model.tokens_per_s is not None for model in self.models)


def windows(
    kind: str,
    samples: Iterable[tuple[float, Mapping[str, float]]],
    plausible: Plausible = PLAUSIBLE,
) -> list[Window]:
    """The plausible windows between consecutive `samples` (oldest first) of an engine."""
    return screened(kind, samples, plausible)[0]


def screened(
    kind: str,
    samples: Iterable[tuple[float, Mapping[str, float]]],
    plausible: Plausible = PLAUSIBLE,
) -> tuple[list[Window], int]:
    """The plausible windows and how many were refused as implausible."""
    ordered = sorted(samples, key=lambda sample: sample[0])
    found, refused = [], 0
    for (at, older), (later, newer) in zip(ordered, ordered[1:], strict=False):
        window = _window(kind, older, newer, later - at)
        if window is None:
            continue
        if _plausible(window, plausible):
            found.append(window)
        else:
            refused += 1
    return found, refused


def _plausible(window: Window, bounds: Plausible) -> bool:
    seconds = window.seconds
    if not seconds > 0:
        return False
    return (
        window.requests / seconds <= bounds.requests_per_s
        and window.prefill_s / window.requests <= bounds.prefill_s_per_request
        and (window.computed_tokens + window.lower_hits) / seconds <= bounds.tokens_per_s
        and window.prefill_s / seconds <= bounds.prefill_s_per_s
    )


def _window(
    kind: str, older: Mapping[str, float], newer: Mapping[str, float], seconds: float
) -> Window | None:
    def delta(name: str) -> float | None:
        if name not in older or name not in newer:
            return None
        return newer[name] - older[name]

    lower = delta("lower_hits_total")
    if kind == "vllm":
        requests, prefill = delta("prefill_seconds_count"), delta("prefill_seconds_sum")
        gpu = delta("prefix_cache_hits_total")
        hits = None if gpu is None else gpu + max(lower or 0.0, 0.0)
    else:
        requests, ttft = delta("ttft_seconds_count"), delta("ttft_seconds_sum")
        queue = delta("queue_seconds_sum")
        prefill = ttft - queue if ttft is not None and queue is not None else None
        hits = delta("cached_tokens_total")
    prompt = delta("prompt_tokens_total")
    counted = (requests, prefill, prompt, hits if hits is not None else 0.0, lower or 0.0)
    if any(value is None or value < 0 for value in counted) or not requests:
        return None  # a counter missing, or reset by a restart, or nothing prefilled
    computed = max(prompt - (hits or 0.0), 0.0)  # type: ignore[operator]
    running = (older.get("running", 0.0) + newer.get("running", 0.0)) / 2
    reloaded = min(lower or 0.0, prompt)  # type: ignore[type-var]
    return Window(requests, computed, prefill, running, reloaded, seconds)  # type: ignore[arg-type]


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(slope, intercept): the median of the pairwise slopes, then the median of y - slope x.
    None without two distinct x."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    ]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    return slope, statistics.median(y - slope * x for x, y in zip(xs, ys, strict=True))


def line(found: Sequence[Window], slowdown: float, reload: float) -> Line | None:
    """The robust line through `found` (its newest MAX_POINTS), or None when there are too
    few windows, no spread in the tokens, or the line is not a plausible prefill."""
    xs, ys = _points(found[-MAX_POINTS:], slowdown, reload)
    if len(xs) < MIN_WINDOWS:
        return None
    fitted = theil_sen(xs, ys)
    if fitted is None or not fitted[0] > 0:
        return None
    slope, intercept = fitted
    speed = 1 / slope
    if not 0 <= intercept <= MAX_FIRST_TOKEN_S or not 1 <= speed <= MAX_TOKENS_PER_S:
        return None
    return _quality(xs, ys, intercept, slope, round(speed))


def _quality(
    xs: list[float], ys: list[float], intercept: float, slope: float, speed: float
) -> Line:
    errors, inliers = [], 0
    for x, y in zip(xs, ys, strict=True):
        predicted = intercept + slope * x
        inliers += abs(predicted - y) <= max(INLIER_TOLERANCE * abs(predicted), 0.002)
        errors.append(abs(predicted - y) / y if y > 0 else 0.0)
    confidence = inliers / len(xs) * min(1.0, len(xs) / (2 * MIN_WINDOWS))
    return Line(round(intercept, 4), float(max(speed, 1)), len(xs), round(confidence, 3),
                round(statistics.median(errors), 3))  # fmt: skip


Reported = Mapping[str, Mapping[str, Sequence[Window]]]
"""Delivered outcomes as windows: pod -> requester -> windows, oldest first."""


def fit(
    base: TtftParameters,
    by_model: Mapping[str, Mapping[str, list[Window]]],
    reload: float = DEFAULT_RELOAD_FRACTION,
    reported: Reported | None = None,
) -> Fit:
    """Fit each pod, each model and the pooled T0 (model -> pod -> engine windows, and
    `reported` outcomes of those pods): see the module docstring. `reload`: the fraction of a
    computed token a lower-tier hit costs."""
    slowdown = base.decode_slowdown
    reported = reported or {}
    pooled_windows = {
        model: [w for pod in pods.values() for w in pod] for model, pods in by_model.items()
    }
    votes_of = {
        pod: _votes(found, reported.get(pod, {}), slowdown, reload)
        for pods in by_model.values()
        for pod, found in pods.items()
    }
    pod_lines = {
        model: {pod: _voted([vote for vote, _ in votes_of[pod]]) for pod in pods}
        for model, pods in by_model.items()
    }
    lines = {
        model: _model_line(pod_lines[model], pooled_windows[model], slowdown, reload)
        for model in by_model
    }
    votes = [(own.first_token_s, len(by_model[model])) for model, own in lines.items() if own]
    pooled = _weighted_median(votes) if votes else None
    first_token_s = pooled if pooled is not None else base.first_token_s
    speeds = dict(base.prefill_tokens_per_s)
    pod_fits = {pod: (t0, speed) for pod, t0, speed in base.pod_fits}
    models, pods = [], []
    for model, found in sorted(pooled_windows.items()):
        own = lines[model]
        through = own.first_token_s if own else first_token_s
        xs, ys = _points(found[-MAX_POINTS:], slowdown, reload)
        if own is not None:
            speed, note = own.tokens_per_s, ""
        elif _flat(xs, ys):
            speed, note = None, _FLAT
        else:
            speed, note = _speed(xs, ys, through)
        if speed is not None:
            speeds[model] = speed
        for pod, pod_line in sorted(pod_lines[model].items()):
            outcomes = sum(count for _, count in votes_of[pod])
            pods.append(PodFit(pod, model, pod_line, outcomes, len(votes_of[pod])))
            if pod_line is not None:
                pod_fits[pod] = (pod_line.first_token_s, pod_line.tokens_per_s)
            elif speed is not None:
                pod_fits[pod] = (round(through, 4), speed)
        models.append(
            ModelFit(
                model,
                len(by_model[model]),
                len(found),
                round(sum(w.requests for w in found)),
                speed,
                own.first_token_s if own else None,
                note,
                own.confidence if own else 0.0,
                own.error if own else None,
                _reload_fraction(found, slowdown, through, speed),
                sum(count for pod in pod_lines[model] for _, count in votes_of[pod]),
            )
        )
    parameters = replace(
        base,
        first_token_s=round(first_token_s, 4),
        prefill_tokens_per_s=tuple(sorted(speeds.items())),
        pod_fits=tuple((pod, t0, speed) for pod, (t0, speed) in sorted(pod_fits.items())),
    )
    return Fit(parameters, models, round(pooled, 4) if pooled is not None else None, pods=pods)


def _votes(
    found: Sequence[Window],
    reports: Mapping[str, Sequence[Window]],
    slowdown: float,
    reload: float,
) -> list[tuple[Line, int]]:
    """A pod's lines, each with the outcomes in it: its engine's, then one per requester.

    A requester's delivered TTFT holds, beside the pod's prefill, a latency outside the pod
    (the gateway's, the network's: about 20 ms through Envoy), the same for every request: it
    is the intercept of the requester's line, not its slope. So where the engine's counters
    (which time the prefill alone) have a line, the requesters' lines vote on the speed only
    and T0 is the engine's; taken as T0, the latency went into every prefill estimate and so
    into the virtual queue once per queued request. A pod only outcomes time takes their T0."""
    engine = line(found, slowdown, reload)
    votes = [] if engine is None else [(engine, 0)]
    for windows_of_one in reports.values():
        reported = line(windows_of_one, slowdown, reload)
        if reported is not None:
            if engine is not None:
                reported = replace(reported, first_token_s=engine.first_token_s)
            votes.append((reported, reported.windows))
    return votes


def _model_line(
    pods: Mapping[str, Line | None], found: Sequence[Window], slowdown: float, reload: float
) -> Line | None:
    """A model's own figures: the median of its pods' own lines, each pod one vote (pods of
    one model run on different GPUs, and a line through all their windows mixes them); the
    line through all its windows when no pod has one."""
    return _voted([pod for pod in pods.values() if pod is not None]) or line(
        found, slowdown, reload
    )


def _voted(votes: Sequence[Line]) -> Line | None:
    """The median of `votes`, value by value (None without a vote)."""
    if not votes:
        return None
    if len(votes) == 1:
        return votes[0]
    return Line(
        statistics.median(vote.first_token_s for vote in votes),
        float(round(statistics.median(vote.tokens_per_s for vote in votes))),
        sum(vote.windows for vote in votes),
        statistics.median(vote.confidence for vote in votes),
        statistics.median(vote.error for vote in votes),
    )


def _points(
    found: Sequence[Window], slowdown: float, reload: float
) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for window in found:
        work = window.computed_tokens + reload * window.lower_hits
        xs.append(work / window.requests * (1 + slowdown * window.running))
        ys.append(window.prefill_s / window.requests)
    return xs, ys


def _flat(xs: list[float], ys: list[float]) -> bool:
    """Enough windows, and the time does not grow with the work."""
    fitted = theil_sen(xs, ys) if len(xs) >= MIN_WINDOWS else None
    return fitted is not None and fitted[0] <= 0


def _weighted_median(votes: list[tuple[float, int]]) -> float:
    """The lower weighted median of (value, weight) votes."""
    ordered = sorted(votes)
    half, seen = sum(weight for _, weight in ordered) / 2, 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]


def _speed(xs: list[float], ys: list[float], first_token_s: float) -> tuple[float | None, str]:
    """Tokens per second through the fixed intercept `first_token_s`: the median of the
    windows' own (robust; one window is enough)."""
    if not xs:
        return None, "no window with prefills: send it traffic and wait a sample interval"
    if not any(xs):
        return None, "every prompt token was cached: nothing to time"
    slopes = [(y - first_token_s) / x for x, y in zip(xs, ys, strict=True) if x > 0]
    slope = statistics.median(slopes)
    if not slope > 0 or not math.isfinite(1 / slope):
        return None, _FLAT
    speed = 1 / slope
    if speed > MAX_TOKENS_PER_S:
        return None, f"{speed:.3g} tokens/s is beyond any engine"
    note = f"only {len(xs)} window(s): T0 not fitted from it"
    if len(xs) >= MIN_WINDOWS:
        note = "no plausible line of its own: its speed is fitted through the pooled T0"
    return float(max(round(speed), 1)), note


def _reload_fraction(
    found: Sequence[Window], slowdown: float, first_token_s: float, speed: float | None
) -> float | None:
    """The median over windows with lower-tier hits of the time left after T0 and the
    computed tokens, per reloaded token, as a fraction of computing one."""
    if speed is None:
        return None
    fractions = []
    for window in found:
        if window.lower_hits <= 0:
            continue
        scale = (1 + slowdown * window.running) / speed / window.requests
        left = window.prefill_s / window.requests - first_token_s - scale * window.computed_tokens
        fractions.append(left / (scale * window.lower_hits))
    if not fractions:
        return None
    return round(min(max(statistics.median(fractions), 0.0), 1.0), 3)


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
    if not isinstance(data, dict) or not math.isfinite(when):
        return None
    counters = {
        name: float(value)
        for name, value in data.items()
        if isinstance(value, int | float) and math.isfinite(value)
    }
    return when, counters


def fit_from_engines(
    client: redis.Redis,
    engines: Iterable[tuple[str, str, str]],
    base: TtftParameters,
    reload: float = DEFAULT_RELOAD_FRACTION,
    reported: Reported | None = None,
) -> Fit:
    """Fit from the samples of `engines` ((pod, model, kind) each) and the outcomes
    `reported` for them (the pods of other engines are not read)."""
    reported = reported or {}
    engines = list(engines)
    samples = read_samples(client, [pod for pod, _, _ in engines])
    by_model: dict[str, dict[str, list[Window]]] = {}
    skipped, refused = [], 0
    for pod, model, kind in engines:
        found, implausible = screened(kind, samples[pod])
        refused += implausible
        if not found and reported.get(pod):
            by_model.setdefault(model, {})[pod] = []
            continue
        if not found:
            why = "fewer than two samples" if len(samples[pod]) < 2 else "no usable window"
            if implausible:
                why = f"{implausible} window(s) past a plausible bound (refused)"
            if kind == "sglang" and all("queue_seconds_sum" not in s for _, s in samples[pod]):
                why = "no queue-time histogram (sglang:queue_time_seconds)"
            skipped.append(f"{pod}: {why}")
            continue
        by_model.setdefault(model, {})[pod] = found
    result = fit(base, by_model, reload, reported)
    return replace(result, skipped=skipped, refused=refused)
