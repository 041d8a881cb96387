"""The metric families kvadmin keeps in Redis, and how each one's samples are stored.

Every process that measures something (the web process scoring requests, worker processes
applying KV events) adds to these Redis hashes; the web process exposes them at /metrics by
reading Redis at scrape time (`collector.py`). Redis is the only shared state, so the numbers
are the same whichever process or replica is scraped, with no per-process files
(prometheus_client's PROMETHEUS_MULTIPROC_DIR) and nothing lost when a worker restarts.

Storage, one HASH per family at `kvadmin:metrics:{name}`; a field starts with the family's
label values joined by US (\\x1f):
- counter: field = labels, value = total (HINCRBY / HINCRBYFLOAT);
- gauge: field = labels, value = last value (HSET);
- histogram: field = labels RS (\\x1e) bucket index (non-cumulative count of observations in
  that bucket; index len(buckets) is +Inf), and labels RS "sum" (HINCRBYFLOAT). The count is
  the sum of the buckets, so an observation costs two commands.

Names reuse kthena's router metrics (`kthena_router_kvcache_aware_*`) where the meaning is the
same, with the `kvadmin_` prefix instead of `kthena_router_`.
"""

from dataclasses import dataclass
from typing import Literal

from scoring import keys

LABEL_SEPARATOR = "\x1f"
BUCKET_SEPARATOR = "\x1e"

MATCH_RATIO_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
"""kthena's `kvcache_aware_match_ratio` buckets: le="0.0" counts the misses."""

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Time to first token, in seconds: from a cached short prompt to a long prefill behind a queue."""

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""kthena's `kvcache_aware_redis_duration_seconds` / `tokenize_duration_seconds` buckets."""


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    """The exposed name; counters end in `_total`."""
    kind: Literal["counter", "gauge", "histogram"]
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()

    @property
    def key(self) -> str:
        return f"{keys.METRICS_KEY_PREFIX}{self.name}"


# Ingestion: written by the reader after each run of batches it applies. The lag and the time
# of the last apply go to the stream's status hash (fields lag_seconds, last_event_at), beside
# its other counters; the families below name them for the exposition.
APPLY_DURATION = Family(
    "kvadmin_ingest_apply_duration_seconds",
    "histogram",
    "Time to apply one run of a stream's batches to the index (one or more Redis script calls)",
    ("pod",),
    LATENCY_BUCKETS,
)
STREAM_LAG = Family(
    "kvadmin_ingest_stream_lag_seconds",
    "gauge",
    "Seconds between the engine publishing a stream's last applied batch and applying it",
    ("pod", "rank"),
)
LAST_APPLY = Family(
    "kvadmin_ingest_last_apply_timestamp_seconds",
    "gauge",
    "Unix time of the last batch applied from the stream",
    ("pod", "rank"),
)

# Scoring: written by the scoring service for each decision.
MATCH_RATIO = Family(
    "kvadmin_kvcache_aware_match_ratio",
    "histogram",
    "Fraction of the prompt's blocks the best-matching candidate pod already held, per "
    "decision (0 = miss)",
    ("model",),
    MATCH_RATIO_BUCKETS,
)
TOKENIZE_DURATION = Family(
    "kvadmin_kvcache_aware_tokenize_duration_seconds",
    "histogram",
    "Time spent tokenizing the prompt (locally, through an engine's /tokenize, or cached)",
    ("model",),
    LATENCY_BUCKETS,
)
INDEX_DURATION = Family(
    "kvadmin_kvcache_aware_redis_duration_seconds",
    "histogram",
    "Time spent in the one-round-trip Redis index read of a decision",
    ("model",),
    LATENCY_BUCKETS,
)
SCORING_DURATION = Family(
    "kvadmin_scoring_duration_seconds",
    "histogram",
    "Time to answer one scoring request, tokenization included",
    ("model",),
    LATENCY_BUCKETS,
)
DECISIONS = Family(
    "kvadmin_decisions_total",
    "counter",
    "Scoring decisions by chosen pod (pod is empty when no candidate could be chosen)",
    ("model", "pod"),
)
REQUESTED_BLOCKS = Family(
    "kvadmin_requested_blocks_total",
    "counter",
    "Prompt blocks of the scored requests",
    ("model",),
)
MATCHED_BLOCKS = Family(
    "kvadmin_matched_blocks_total",
    "counter",
    "Prompt blocks the chosen pod already held, by the medium it held them in",
    ("model", "medium"),
)
SCORING_ERRORS = Family(
    "kvadmin_kvcache_aware_errors_total",
    "counter",
    "Scoring requests aborted by an error, by failing stage (tokenize or redis)",
    ("model", "stage"),
)

# Local tokenizers: per decision that tokenized text (recorded with it), and per consistency
# check (by the checking thread, `routing.tokenizer_guard`).
TOKENIZATIONS = Family(
    "kvadmin_tokenizations_total",
    "counter",
    "Text and chat requests by where their token ids came from (local, engine or cache)",
    ("model", "tokenizer"),
)
LOCAL_TOKENIZER_FALLBACKS = Family(
    "kvadmin_local_tokenizer_fallbacks_total",
    "counter",
    "Requests of a model with a local tokenizer that went to an engine's /tokenize instead, by "
    "reason (template: the chat template failed; unavailable: its files did not load; "
    "disabled: the consistency guard turned it off)",
    ("model", "reason"),
)
TOKENIZER_CHECKS = Family(
    "kvadmin_local_tokenizer_checks_total",
    "counter",
    "Sampled comparisons of local token ids with an engine's /tokenize, by result (match; "
    "mismatch: engines that agree with one another differ; dissent: one engine differs, "
    "another agrees; inconclusive: two engines differ from it and each other; skipped: the "
    "check queue was full or no engine answered)",
    ("model", "result"),
)
LOCAL_TOKENIZER_DISABLED = Family(
    "kvadmin_local_tokenizer_disabled",
    "gauge",
    "1 when the consistency guard disabled the model's local tokenizer",
    ("model",),
)
TOKENIZER_ENGINE_CHECKS = Family(
    "kvadmin_local_tokenizer_engine_checks",
    "gauge",
    "Checks of the model's local tokenizer since it was (re)armed that asked this engine, by "
    "its result (match, mismatch, dissent: it differed where another engine agreed)",
    ("model", "pod", "result"),
)
TOKENIZER_ENGINE_DISSENTING = Family(
    "kvadmin_local_tokenizer_engine_dissenting",
    "gauge",
    "1 when the engine's /tokenize disagrees where the model's other engines agree with its "
    "local tokenizer: reported, and left out of the checks",
    ("model", "pod"),
)

# Engine load: written by the load scraper (`kvadmin.load.scraper`) after each scrape.
LOAD_SCRAPES = Family(
    "kvadmin_load_scrapes_total",
    "counter",
    "Scrapes of an engine's /metrics for its load, by result (ok; timeout, error, http, "
    "too_large, unparsable, missing, bad_value: the load was not updated)",
    ("pod", "result"),
)
LOAD_SCRAPE_DURATION = Family(
    "kvadmin_load_scrape_duration_seconds",
    "histogram",
    "Time to fetch and parse one successful scrape of an engine's /metrics",
    ("pod",),
    LATENCY_BUCKETS,
)

# Long-lived loops (ingest, load scraper, probes, value-format rewrite, live feed): written by
# `kvadmin.loop_guard` once Redis answers again after failed rounds.
LOOP_FAILURES = Family(
    "kvadmin_loop_failures_total",
    "counter",
    "Rounds of a long-lived loop that failed and were retried after a backoff, by loop and "
    "kind (redis_unavailable: unreachable, stalled, LOADING or BUSY; redis_error: a refused "
    "command such as MOVED; database; otherwise the exception's class: a bug)",
    ("loop", "kind"),
)

# Calibration: written by each run of the calibration task (`kvadmin.weights.calibration`).
CALIBRATION_RUNS = Family(
    "kvadmin_calibration_runs_total",
    "counter",
    "Runs of the TTFT calibration, by result (changed: a version was appended; unchanged: "
    "within the guard rails nothing moved; manual: the parameters are pinned; off: "
    "KVADMIN_CALIBRATION is false; stale: an operator saved meanwhile; error)",
    ("result",),
)

# Delivered hits: written with each decision's outcome (`routing.outcomes`), per model and the
# chosen pod (where the request went). Routing loss is available - achieved, index staleness
# achieved - delivered.
OUTCOMES = Family(
    "kvadmin_outcomes_total",
    "counter",
    "Decisions whose outcome (the engine's reported usage) was posted",
    ("model", "pod"),
)
OUTCOME_PROMPT_TOKENS = Family(
    "kvadmin_outcome_prompt_tokens_total",
    "counter",
    "Prompt tokens of the decisions with an outcome, as the engine reported them",
    ("model", "pod"),
)
HIT_TOKENS_AVAILABLE = Family(
    "kvadmin_hit_tokens_available_total",
    "counter",
    "Cached tokens the best candidate was predicted to hit, at decision time",
    ("model", "pod"),
)
HIT_TOKENS_ACHIEVED = Family(
    "kvadmin_hit_tokens_achieved_total",
    "counter",
    "Cached tokens the chosen pod was predicted to hit, at decision time",
    ("model", "pod"),
)
HIT_TOKENS_DELIVERED = Family(
    "kvadmin_hit_tokens_delivered_total",
    "counter",
    "Cached tokens the chosen pod's engine reported (usage.prompt_tokens_details.cached_tokens)",
    ("model", "pod"),
)
OUTCOME_TTFT = Family(
    "kvadmin_outcome_ttft_seconds",
    "histogram",
    "Time to first token the gateway reported with an outcome (its ttft_ms)",
    ("model", "pod"),
    TTFT_BUCKETS,
)
PREDICTED_TTFT = Family(
    "kvadmin_outcome_predicted_ttft_seconds",
    "histogram",
    "Time to first token predicted for the chosen pod at decision time (its wait plus prefill "
    "estimate), for the outcomes that reported one",
    ("model", "pod"),
    TTFT_BUCKETS,
)
PREDICTION_ERROR_BUCKETS = (0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0)
"""Around issue 33's targets: a median error of at most 0.15, a p90 of at most 0.5."""
TTFT_ERROR = Family(
    "kvadmin_outcome_ttft_error_ratio",
    "histogram",
    "The ttft policy's prediction error per outcome that reported a time to first token: "
    "abs(predicted - delivered) / delivered (the mean ratio hides errors that cancel out)",
    ("model", "pod"),
    PREDICTION_ERROR_BUCKETS,
)
OUTCOME_TIMINGS = {
    "ttft_ms": OUTCOME_TTFT,
    "predicted_ttft_ms": PREDICTED_TTFT,
    "ttft_error": TTFT_ERROR,
}
"""An outcome with a `ttft_ms` (and a prediction) observes each, the times in seconds; the
per-minute buckets keep their sums (field suffix: the name; times in ms) and their count (the
name + "_n")."""
OUTCOME_TALLIES = {
    "outcomes": OUTCOMES,
    "prompt": OUTCOME_PROMPT_TOKENS,
    "available": HIT_TOKENS_AVAILABLE,
    "achieved": HIT_TOKENS_ACHIEVED,
    "delivered": HIT_TOKENS_DELIVERED,
}
"""Each outcome adds to these, by the tally's name (also the field suffix of the per-minute
buckets, `keys.OUTCOME_MINUTES_KEY_PREFIX`)."""

RECORDED = (
    APPLY_DURATION,
    MATCH_RATIO,
    TOKENIZE_DURATION,
    INDEX_DURATION,
    SCORING_DURATION,
    DECISIONS,
    REQUESTED_BLOCKS,
    MATCHED_BLOCKS,
    SCORING_ERRORS,
    TOKENIZATIONS,
    LOCAL_TOKENIZER_FALLBACKS,
    TOKENIZER_CHECKS,
    LOAD_SCRAPES,
    LOAD_SCRAPE_DURATION,
    LOOP_FAILURES,
    CALIBRATION_RUNS,
    *OUTCOME_TALLIES.values(),
    *OUTCOME_TIMINGS.values(),
)
"""Every family with its own Redis hash, in exposition order."""


def label_field(values: tuple[str, ...]) -> str:
    return LABEL_SEPARATOR.join(v.replace(LABEL_SEPARATOR, "_") for v in values)


def label_values(field: str) -> list[str]:
    return field.split(LABEL_SEPARATOR)
