"""The one source of truth for the Redis key layout.

kthena-compatible keys (compatibility.md 2.2, 2.3) are read by kthena's Go router and must not
change.
The `kvadmin:` keys are kvadmin's own bookkeeping beside them.
"""

from collections.abc import Iterable
from typing import Final

from scoring.values import ValueFormat

BLOCK_KEY_PREFIX = "matrix:kv:block:"
ENGINE_HASH_TTL_SECONDS = 86400


def block_key(model: str, std_hash: int) -> str:
    """HASH: field pod id -> "{unix_seconds}|{MEDIUM}" (compatibility.md 2.2)."""
    return f"{BLOCK_KEY_PREFIX}{model}@{std_hash}"


def block_keys(model: str, std_hashes: Iterable[int]) -> list[str]:
    """`block_key` of each hash, in order: the scoring reader builds one per request block."""
    prefix = f"{BLOCK_KEY_PREFIX}{model}@"
    return [f"{prefix}{std_hash}" for std_hash in std_hashes]


def engine_hash_key(engine_kind: str, pod: str, engine_hash: int | str) -> str:
    """STRING: the decimal standardized hash for one engine hash of one pod (compatibility.md 2.3).

    `engine_kind` is "vllm" or "sglang"; `engine_hash` is the engine's integer or its
    decimal/hex text form for byte hashes.
    """
    return f"{engine_kind}:kv:block:{pod}@{engine_hash}"


def block_value(timestamp: int, medium: str | None) -> str:
    """The tiered field value kthena reads: "ts" for no medium, otherwise "ts|MEDIUM"
    (`values.ValueFormat` has both formats)."""
    return ValueFormat.TIERED.field_value(timestamp, medium)


# kvadmin's own bookkeeping. `{pod}` is "{pod_name}.{namespace}"; `{medium}` is the medium as
# the engine spelled it, "" for none; `{stream}` names one stream of the pod (`stream_name`).

PUSHED_STREAM_PREFIX = "push:"


def stream_name(rank: int, *, pushed: bool = False) -> str:
    """The `{stream}` part of a stream's keys: "{rank}" for data-parallel rank r's ZMQ stream,
    "push:{rank}" for rank r's batches pushed over HTTP. Two key spaces that cannot meet: no
    rank of one spells a name of the other."""
    if rank < 0:
        raise ValueError(f"a data-parallel rank is >= 0, not {rank}")
    return f"{PUSHED_STREAM_PREFIX}{rank}" if pushed else str(rank)


def parse_stream_name(name: str) -> tuple[int, bool] | None:
    """(rank, pushed) of a `stream_name`; None for anything else, such as the negative ranks
    under which builds before pushed streams had their own names kept them."""
    pushed = name.startswith(PUSHED_STREAM_PREFIX)
    digits = name.removeprefix(PUSHED_STREAM_PREFIX) if pushed else name
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(digits), pushed


def stream_status_key(pod: str, stream: str) -> str:
    """HASH: one stream's state and counters (last_seq, owner, connected, gaps, ...)."""
    return f"kvadmin:stream:{pod}|{stream}"


def rank_status_keys(pod: str, dp_size: int) -> list[str]:
    """The status hashes of the pod's data-parallel ranks' ZMQ streams, 0..dp_size-1: scoring
    reads the pod's start from their `started_at` (`scoring.values.pod_start`)."""
    return [stream_status_key(pod, stream_name(rank)) for rank in range(dp_size)]


def stream_lease_key(pod: str, stream: str) -> str:
    """STRING with a TTL: the worker that owns one stream."""
    return f"kvadmin:lease:{pod}|{stream}"


ENGINE_BLOCK_BUCKETS = 1000
"""How many hashes hold one generation of a stream's engine blocks, one per value of an engine
hash's last three decimal digits: a stream of up to about 128,000 blocks keeps each of them
under Redis's hash-max-listpack-entries (128), so they stay listpacks (docs/capacity.md
section 1). `kvadmin.index.engine_blocks` owns the layout."""


def engine_blocks_key(pod: str, stream: str, generation: int, bucket: int) -> str:
    """HASH: engine hash field -> "{std_hash}|{medium},{medium}...", the media in which this
    stream holds that engine block ("{std_hash}" for GPU alone, "-{std_hash}" for CPU alone:
    `kvadmin.index.engine_blocks.Entry`), for the engine hashes of one bucket of one
    generation of the stream (`kvadmin.index.engine_blocks.slot` gives the bucket and the
    field). The source of truth for removals. A clear or a stream purge retires the live
    generation whole (the stream status's `generation` names the live one)."""
    return f"kvadmin:eb:{pod}|{stream}|{generation}:{bucket:03d}"


def refcount_key(pod: str) -> str:
    """HASH: "{std_hash}|{medium}" -> how many (stream, engine hash) pairs of the pod hold it."""
    return f"kvadmin:rc:{pod}"


def residency_key(pod: str, medium: str) -> str:
    """ZSET: std_hash -> `residency_score` of the last store; the pod holds it in that medium."""
    return f"kvadmin:res:{pod}|{medium}"


RESIDENCY_TICKS_PER_SECOND = 1_000_000


def residency_score(unix_seconds: float) -> int:
    """A residency score: unix microseconds (see kvadmin.index.writer)."""
    return round(unix_seconds * RESIDENCY_TICKS_PER_SECOND)


def residency_seconds(score: float) -> int:
    """Whole unix seconds of a residency score."""
    return int(score) // RESIDENCY_TICKS_PER_SECOND


def pod_media_key(pod: str) -> str:
    """SET: every medium with a residency ZSET for the pod."""
    return f"kvadmin:media:{pod}"


POD_MODELS_KEY = "kvadmin:pods"
"""HASH: pod -> served model name, for every pod with entries in the index."""


POD_KINDS_KEY = "kvadmin:pod-kinds"
"""HASH: pod -> engine kind ("vllm" or "sglang"), beside POD_MODELS_KEY: a purge needs it to
name the pod's engine-hash mapping keys."""


def pod_ranks_key(pod: str) -> str:
    """SET: the `{stream}` names of the pod whose engine blocks may hold entries."""
    return f"kvadmin:ranks:{pod}"


def retired_set_key(pod: str) -> str:
    """HASH: "{stream}|{generation}" of every retired generation of the pod's engine blocks
    not yet drained -> the next bucket to drain."""
    return f"kvadmin:eb-retired:{pod}"


# The engine blocks as builds before issue 35 kept them, one hash per stream: read only to
# upgrade a pod to the layout above (`kvadmin.index.engine_blocks`).


def legacy_engine_blocks_key(pod: str, stream: str) -> str:
    """HASH, as `engine_blocks_key` for the whole stream."""
    return f"kvadmin:eh:{pod}|{stream}"


def legacy_retired_blocks_key(pod: str, stream: str, generation: int) -> str:
    """HASH, as `legacy_engine_blocks_key`: a stream's engine blocks retired by a clear."""
    return f"kvadmin:eh-retired:{pod}|{stream}|{generation}"


def legacy_retired_set_key(pod: str) -> str:
    """SET: "{stream}|{generation}" of every `legacy_retired_blocks_key` of the pod."""
    return f"kvadmin:retired:{pod}"


# kvadmin's application state beside the index.

REGISTRY_VERSION_KEY = "kvadmin:registry:version"
"""STRING: bumped on every engine registry change; ingest loops reload when it moves."""

WORKERS_KEY = "kvadmin:ingest:workers"
"""ZSET: ingest worker id -> last heartbeat (unix seconds)."""

API_CACHE_VERSION_KEY = "kvadmin:api:registry_version"
"""STRING: a random value set anew by every change of API tokens or engines: web processes
reload their copies of both when it moves (kvadmin.api.process_cache)."""


def push_queue_key(pod: str) -> str:
    """LIST: "{seq}|{msgpack batch}" pushed through the API, applied in order."""
    return f"kvadmin:push:{pod}"


def push_seq_key(pod: str) -> str:
    """STRING: the last seq given to a pushed batch of the pod."""
    return f"kvadmin:push:seq:{pod}"


def push_lock_key(pod: str) -> str:
    """STRING with a TTL: held by the task draining the pod's pushed batches."""
    return f"kvadmin:push:lock:{pod}"


DECISIONS_KEY = "kvadmin:decisions"
"""STREAM, capped: every routing decision, field "d" = msgpack record."""

WEIGHTS_VERSION_KEY = "kvadmin:weights:version"
"""STRING: the number of the tier-weights version scoring uses."""
WEIGHTS_CONFIG_KEY = "kvadmin:weights:config"
"""STRING: JSON {"version": n, "weights": {...}, "fallback": w, "notes": {...}} of it."""

VALUE_FORMAT_KEY = "kvadmin:index:value-format"
"""HASH: the switch of the matrix values to a format, as far as it went (target, current,
cursor, passes, checked, estimate, rewritten, ...; kvadmin.index.value_format)."""
VALUE_FORMAT_LOCK_KEY = "kvadmin:index:value-format:lock"
"""STRING with a TTL: held by the process rewriting the values."""

GC_LAST_RUN_KEY = "kvadmin:gc:last"
"""HASH: the last garbage-collection run's report."""
GC_TOTALS_KEY = "kvadmin:gc:totals"
"""HASH: GC runs and their removal counts added up."""
GC_LOCK_KEY = "kvadmin:gc:lock"
"""STRING with a TTL: held by the running GC."""

TOKENIZER_GUARD_KEY = "kvadmin:tokenizer:guard"
"""HASH: per model with a local tokenizer, the consistency checks since it was (re)armed:
"{model}\x1fchecks", "{model}\x1fmismatches", and "{model}\x1fdisabled_at" (unix seconds)
once its mismatch rate disabled it."""

METRICS_KEY_PREFIX = "kvadmin:metrics:"
"""HASH per metric family (counters, histogram buckets by label set)."""
HITS_KEY_PREFIX = "kvadmin:metrics:hits:"
"""HASH per minute: decisions, blocks, hits and "m:{medium}" for the dashboard's chart."""

DASHBOARD_SAMPLES_KEY = "kvadmin:dashboard:samples"
"""LIST of JSON fleet totals, newest first: rates come from their differences."""


def pod_samples_key(pod: str) -> str:
    """ZSET: the pod's blocks per medium over the last hour, every sample taken (JSON samples
    by unix seconds; kvadmin.residency.samples)."""
    return f"kvadmin:samples:{pod}"


def pod_minute_samples_key(pod: str) -> str:
    """ZSET: the pod's blocks per medium over the last day, the first sample of each minute
    (the same members as `pod_samples_key`)."""
    return f"kvadmin:minute-samples:{pod}"


def engine_probe_key(pod: str) -> str:
    """HASH: the last replay-socket and HTTP /health probes of the pod's engine (when, whether
    each answered, how long it took, why not), `kvadmin.engines.probes` writes it."""
    return f"kvadmin:probe:{pod}"


def load_lock_key(pod: str) -> str:
    """STRING with a TTL just under the scrape period: the worker scraping the pod this period."""
    return f"kvadmin:load-lock:{pod}"


def load_fit_samples_key(pod: str) -> str:
    """LIST, newest first: "<unix seconds> <JSON>" samples of the pod's prefill counters and
    running requests, one per fit interval (kvadmin.load.scraper), for fitting the TTFT
    parameters (kvadmin.weights.fit). Capped; expires when the scrapes stop."""
    return f"kvadmin:load-samples:{pod}"


def load_error_key(pod: str) -> str:
    """HASH: the pod's last failed load scrape: at (unix seconds), reason, message."""
    return f"kvadmin:load-error:{pod}"


DEMO_PODS_KEY = "kvadmin:demo:pods"
"""HASH pod -> data-parallel size: the pods `manage.py simulate --register` registered, so that
`make reset-demo` can forget them and nothing else."""


# Routing state of the `ttft` policy (scoring.policy): read in the walk's round trip
# (prefix_walk.lua), written with the decision log entry (route_record.lua).


def speculative_key(model: str) -> str:
    """HASH: std_hash -> the id of the block's group in `speculative_groups_key`: blocks of
    requests kvadmin just routed to a pod, before their BlockStored arrives. A request's blocks
    share their groups, so one short field per block answers every candidate
    (scoring.route_state). The field "" holds a long filler that keeps the hash a hashtable.
    Cleaned and bounded by route_record.lua; the model's five speculative keys expire with its
    newest entry."""
    return f"kvadmin:spec:blocks:{model}"


def speculative_groups_key(model: str) -> str:
    """HASH: group id (the first 16 hex digits of its content's SHA1) -> JSON array
    [pod, expiry, pod, expiry, ...] sorted by pod, each expiry (unix ms) as exact decimal text:
    until when the blocks pointing at the group count as held by each pod."""
    return f"kvadmin:spec:groups:{model}"


def speculative_group_refs_key(model: str) -> str:
    """HASH: group id -> how many blocks name it; a group none names is deleted."""
    return f"kvadmin:spec:group-refs:{model}"


def speculative_records_key(model: str) -> str:
    """ZSET: JSON array [pod, std_hash, ...] -> expiry (unix ms): the blocks each routed
    request pointed at new groups, by expiry, so that expired blocks are removed and the
    earliest-expiring go first beyond ROUTING_SPECULATIVE_MAX."""
    return f"kvadmin:spec:records:{model}"


def speculative_count_key(model: str) -> str:
    """STRING: the blocks `speculative_records_key`'s records hold, which
    ROUTING_SPECULATIVE_MAX bounds."""
    return f"kvadmin:spec:count:{model}"


def speculative_keys(model: str) -> list[str]:
    """The model's five speculative keys, in the order route_record.lua takes them."""
    return [
        speculative_key(model),
        speculative_groups_key(model),
        speculative_group_refs_key(model),
        speculative_records_key(model),
        speculative_count_key(model),
    ]


def queue_key(pod: str) -> str:
    """HASH: the pod's virtual queue: `busy_until_ms` (unix ms at which the prefills kvadmin
    routed to it are predicted to be done; the scraper restarts it from the engine's waiting
    requests), `prefill_ms` (a moving mean of their S_est), `wait_log` (the log of the
    delivered correction of its wait, moved by outcomes: scoring.route_state), `prefill_log`
    and `prefill_offset` (the factor's log and the offset of the delivered correction of its
    prefill estimates), `prefill_version` (the weights version they were learned against) and
    `prefill_fit` (the outcomes and means they were fitted from: `PrefillFit.stored`)."""
    return f"kvadmin:queue:{pod}"


QUEUE_FIELDS: Final = (
    "busy_until_ms",
    "prefill_ms",
    "wait_log",
    "prefill_log",
    "prefill_offset",
    "prefill_version",
)
"""The queue hash's fields every reader reads, in this order (`RawPodState`'s names)."""


def in_flight_key(pod: str) -> str:
    """ZSET: decision id -> predicted prefill end (unix ms) of the requests routed to the pod;
    those that ended less than the in-flight window ago are still decoding. Bounded in size."""
    return f"kvadmin:inflight:{pod}"


LOAD_FIELDS: Final = ("running", "waiting", "kv_usage", "scraped_at")
"""The load hash's fields every reader reads, in this order: `running`, `waiting` (ints),
`kv_usage` (float 0..1), `scraped_at` (unix seconds, float). scoring.load_hash reads them for
the pages, metrics and health, scoring.index for routing (prefix_walk.lua's HMGET names them in
the same order)."""


def load_key(pod: str) -> str:
    """HASH written by the engines' /metrics scraper: the LOAD_FIELDS, the scrape's duration and
    the engine's counters (kvadmin.load.scraper.load_fields)."""
    return f"kvadmin:load:{pod}"


UNKNOWN_TAG_FIELD_PREFIX = "unknown_tag:"
"""Stream status fields "unknown_tag:{tag}": events of that unknown tag the stream sent (the
first few distinct tags only, see `kvadmin.index.writer`)."""


# Delivered hits: what the engines reported for the requests routed by decisions
# (kvadmin.routing.outcomes), kept as long as the decision log keeps the decisions.

DECISION_IDS_KEY = "kvadmin:decision-ids"
"""ZSET: decision id -> unix ms of its decision log entry (the entry id's time part), trimmed
to the log's DECISIONS_MAX newest by route_record.lua: how an outcome finds its decision."""

OUTCOMES_KEY = "kvadmin:outcomes"
"""HASH: decision id -> JSON outcome (cached_tokens, prompt_tokens, ttft_ms, at). Written once
(HSETNX); a field goes when route_record.lua trims its id out of DECISION_IDS_KEY."""

OUTCOME_LOG_KEY = "kvadmin:outcome-log"
"""STREAM, capped at DECISIONS_MAX: each timed outcome as it is recorded, field "d" = its
decision (JSON, the chosen pod's estimate only), "o" = the outcome JSON. Calibration follows it
from a cursor (kvadmin.weights.evidence_window) instead of rescanning the decision log."""

CALIBRATION_EVIDENCE_KEY = "kvadmin:calibration:evidence"
"""HASH: calibration's folded outcomes (kvadmin.weights.evidence_window): "cursor", "consumed",
"generation", "lost", and per model and pod "w:{model}US{pod}" = JSON requester -> windows."""

OUTCOME_MINUTES_KEY_PREFIX = "kvadmin:metrics:outcomes:"
"""HASH per minute (unix seconds // 60), with a TTL: "{model}US{pod}RS{tally}" -> tokens (or
outcomes) of the decisions whose outcome arrived that minute, for the dashboard."""
