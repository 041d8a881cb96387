"""Product knobs: `settings.KVADMIN` merged over CONFIG_DEFAULTS by one cached function,
reset when settings change (so `override_settings` works in tests).

Settings fills `KVADMIN` from KVADMIN_<NAME> environment variables; their text is converted
to the type of the default here.
"""

import difflib
from functools import cache
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from scoring.values import ROUTER_VERSIONS, ValueFormat

CONFIG_DEFAULTS: dict[str, Any] = {
    "DEMO": True,  # make run starts a simulated fleet with traffic
    # make run leaves routine lines out of its log: beat's ticks, task results, and
    # every successful read (pages, htmx polls) and machine call (kvadmin/routine_logs.py).
    "QUIET_LOGS": True,
    # The port make run's web server listens on, on 127.0.0.1, and its processes (uvicorn
    # workers; 0: one per core).
    "PORT": 8000,
    "WEB_WORKERS": 0,
    # How long each process waits at start for Redis to answer (and load its data).
    "STARTUP_TIMEOUT": 120.0,
    "INGEST": True,  # Celery workers consume KV event streams
    # The index split over several Redis primaries, by model: a JSON object of model-name
    # globs to Redis URLs, first match wins, "*" (the default group) last. Empty: one group
    # on REDIS_URL. kvadmin/index/groups.py reads and checks it.
    "INDEX_GROUPS": "",
    "LEASE_SECONDS": 10.0,  # a dead worker's streams are taken over after this
    "PURGE_ON_GAP": True,  # purge a stream's entries when events are lost for good
    # Celery workers scrape each enabled engine's /metrics (its HTTP base URL) for its load
    # about every LOAD_SCRAPE_PERIOD_SECONDS, one worker per engine per period; a scrape
    # gets at most LOAD_SCRAPE_TIMEOUT_SECONDS and LOAD_SCRAPE_MAX_BYTES. The load is kept
    # LOAD_TTL_SECONDS and is "stale" once older than LOAD_STALE_SECONDS, for the pages, the
    # metrics and alerts and routing alike (routing then prices a pod's wait by kvadmin's own
    # virtual queue alone and flags its load stale).
    "LOAD_SCRAPE": True,
    "LOAD_SCRAPE_PERIOD_SECONDS": 1.0,
    "LOAD_SCRAPE_TIMEOUT_SECONDS": 0.5,
    "LOAD_SCRAPE_MAX_BYTES": 1024 * 1024,
    "LOAD_SCRAPE_THREADS": 16,
    "LOAD_TTL_SECONDS": 60.0,
    "LOAD_STALE_SECONDS": 3.0,
    # The prefill counters are also kept as a sample every LOAD_FIT_SAMPLE_SECONDS, the latest
    # LOAD_FIT_SAMPLES of them per engine: what /weights/ fits the TTFT parameters from.
    "LOAD_FIT_SAMPLE_SECONDS": 1.0,
    "LOAD_FIT_SAMPLES": 360,
    # Largest batch accepted by POST /api/v1/events/<pod>; DATA_UPLOAD_MAX_MEMORY_SIZE caps it.
    "PUSH_MAX_BYTES": 2 * 1024 * 1024,
    # What ingestion accepts of one KV-event batch (ZMQ or pushed); real engines stay far below.
    # Nesting deeper than INGEST_MAX_DEPTH or more than INGEST_MAX_EVENTS events make the batch
    # undecodable; an event with more than INGEST_MAX_HASHES block hashes or INGEST_MAX_TOKENS
    # token ids is skipped. vLLM and SGLang batches nest 4 to 5 deep, and one event carries
    # at most a scheduler step's new blocks (max_num_batched_tokens: thousands of tokens).
    "INGEST_MAX_DEPTH": 32,
    "INGEST_MAX_EVENTS": 65_536,
    "INGEST_MAX_HASHES": 65_536,
    "INGEST_MAX_TOKENS": 1_048_576,
    "BLOCK_SIZE": 16,
    "MAX_BLOCKS": 128,
    # Garbage collection drops ownership not refreshed by a store for this long (kthena: 24 h),
    # in a run at most every GC_INTERVAL_SECONDS.
    "GC_MAX_AGE_SECONDS": 86400,
    "GC_INTERVAL_SECONDS": 600.0,
    # /metrics answers these client addresses or networks (comma-separated) without a token.
    "METRICS_ALLOW": "",
    # Proxies (comma-separated addresses or networks) whose X-Forwarded-For/-Proto the web
    # server believes (kvadmin/web_server.py); empty: none, the connection's peer is the client.
    "TRUSTED_PROXIES": "",
    # A stream whose last applied batch was published longer ago than this is "lagging".
    "STREAM_LAG_SECONDS": 5.0,
    # Engine health from evidence (kvadmin/engines/evidence.py): "stale" once no probe,
    # scrape or event is younger than HEALTH_STALE_SECONDS; "ok" with events in the last
    # HEALTH_EVENTS_SECONDS, "idle" (reachable, nothing to publish) without.
    "HEALTH_STALE_SECONDS": 10.0,
    "HEALTH_EVENTS_SECONDS": 60.0,
    # The evidence of life (kvadmin/ingest/probes.py): a Celery beat task every
    # PROBE_PERIOD_SECONDS asks each enabled engine's replay socket and HTTP /health, each
    # within PROBE_TIMEOUT_SECONDS (all engines in parallel).
    "PROBE_PERIOD_SECONDS": 2.0,
    "PROBE_TIMEOUT_SECONDS": 1.0,
    # Scoring API: the longest token_ids (or tokenized prompt) accepted; engine /tokenize
    # calls (seconds for the whole of each, as kthena; how many requests of one model may
    # wait on its engines at once) and how many prompts' token ids are kept (LRU).
    "SCORE_MAX_TOKENS": 262_144,
    # The lean scoring path (kvadmin/api/fast_path.py): requests in flight per web process
    # beyond which it answers 503 with Retry-After at once rather than queueing, how long a
    # request's whole body may take to arrive (408 after), and how often each process checks
    # that the API tokens and engines it keeps in memory are current.
    "API_MAX_IN_FLIGHT": 32,
    "API_BODY_TIMEOUT_SECONDS": 5.0,
    "API_CACHE_REFRESH_SECONDS": 0.5,
    # The endpoint picker (`manage.py endpoint_picker`, kvadmin/gateway): a request body
    # beyond PICKER_MAX_BODY_BYTES is answered 413; a decision not made within
    # PICKER_DECISION_DEADLINE_SECONDS nor within PICKER_REQUEST_BUDGET_SECONDS of the
    # request's start (a body that comes later starts none: "behind"), or while Redis is
    # out (and for PICKER_OUTAGE_SECONDS after an outage answered), is a degraded one, the
    # ready pod this process routed to least recently, as is one beyond
    # PICKER_MAX_DECISIONS_IN_FLIGHT decisions in flight (late ones included; 0: one per
    # 5 ms of the deadline, 10 at 50 ms: kvadmin/gateway/picker.py); PICKER_FALLBACKS
    # endpoints follow the chosen one for the gateway's retries. PICKER_SHED_WAIT_SECONDS
    # above 0 answers 429 when every candidate's predicted wait is beyond it. The picker
    # keeps the first and last PICKER_USAGE_WINDOW_BYTES of a response to find its usage in.
    "PICKER_MAX_BODY_BYTES": 4 * 1024 * 1024,
    "PICKER_DECISION_DEADLINE_SECONDS": 0.05,
    "PICKER_REQUEST_BUDGET_SECONDS": 0.25,
    "PICKER_OUTAGE_SECONDS": 1.0,
    "PICKER_MAX_DECISIONS_IN_FLIGHT": 0,
    "PICKER_FALLBACKS": 2,
    "PICKER_SHED_WAIT_SECONDS": 0.0,
    "PICKER_USAGE_WINDOW_BYTES": 16 * 1024,
    "TOKENIZE_TIMEOUT": 5.0,
    "TOKENIZE_WAITING_PER_MODEL": 2,
    "TOKENIZE_CACHE_SIZE": 1024,
    # Local tokenizers (Engine.tokenizer): 1 in TOKENIZER_CHECK_EVERY locally tokenized
    # requests is also sent to an engine's /tokenize, off the request path (0: never); once a
    # model has TOKENIZER_CHECK_MIN checks and more than TOKENIZER_MISMATCH_MAX of them
    # differ (engines that agree with one another: routing/tokenizer_guard.py), its local
    # tokenizer is disabled (each process notices within TOKENIZER_GUARD_REFRESH_SECONDS).
    "TOKENIZER_CHECK_EVERY": 100,
    "TOKENIZER_CHECK_MIN": 20,
    "TOKENIZER_MISMATCH_MAX": 0.05,
    "TOKENIZER_GUARD_REFRESH_SECONDS": 1.0,
    # The decision log: record every decision, in a stream of about this many entries.
    "DECISIONS_RECORD": True,
    "DECISIONS_MAX": 10_000,
    # Calibration (kvadmin.weights.calibration): beat refits the TTFT parameters per pod and
    # model every CALIBRATION_PERIOD_SECONDS from the engines' prefill counters and appends a
    # version (author "calibration") when the guard rails let a value move; parameters saved
    # with calibration "manual" are left alone.
    "CALIBRATION": True,
    "CALIBRATION_PERIOD_SECONDS": 2.0,
    # ... and from the delivered outcomes (TTFT, cached and prompt tokens) of the last
    # CALIBRATION_OUTCOME_SECONDS, folded as they arrive, at most CALIBRATION_OUTCOMES per run
    # (kvadmin.weights.evidence_window).
    "CALIBRATION_OUTCOMES": 2000,
    "CALIBRATION_OUTCOME_SECONDS": 900.0,
    # Each process re-reads the published tier-weights version at most this often (seconds).
    "WEIGHTS_REFRESH_SECONDS": 0.5,
    # What-if previews replay this many of the latest recorded decisions by default.
    "WHATIF_DECISIONS": 1000,
    # Routing (scoring.policy): the policy of requests that name none, "ttft" (lowest
    # estimated time to first token) or "kthena" (highest kthena score). The `ttft` state:
    # blocks just routed to a pod count as held there until ROUTING_SPECULATIVE_SECONDS after
    # the request's predicted prefill end (at most ROUTING_SPECULATIVE_MAX blocks per model,
    # counted per routed request, the earliest-expiring dropped first); a routed request
    # counts as running on its pod until ROUTING_IN_FLIGHT_SECONDS after its predicted
    # prefill (at most ROUTING_IN_FLIGHT_MAX per pod); the engines' scraped load is used
    # until it is stale (LOAD_STALE_SECONDS).
    "ROUTING_POLICY": "ttft",
    "ROUTING_SPECULATIVE_SECONDS": 1.0,
    "ROUTING_SPECULATIVE_MAX": 65536,
    "ROUTING_IN_FLIGHT_SECONDS": 2.0,
    "ROUTING_IN_FLIGHT_MAX": 1024,
    # A decision records the TTFT estimates of its cheapest this many candidates (and the
    # chosen pod's): the decision log's size stays bounded however large the fleet.
    "ROUTING_ESTIMATES_MAX": 16,
    # The matrix values kvadmin writes (compatibility.md 2.7): "tiered" ("ts|MEDIUM", for
    # kthena with PR #1293) or "legacy" ("ts", for kthena main, which parses the whole value
    # as a timestamp). Media stay in kvadmin's residency either way. Changing it rewrites the
    # index's values in bounded steps (kvadmin/index/value_format.py, INDEX_REWRITE_*).
    "INDEX_VALUE_FORMAT": "tiered",
    # kthena's sidecar mapping keys `{kind}:kv:block:{pod}@{engine hash}` (compatibility.md
    # 2.3): kthena's router never reads them, only its sidecar does. Turn on before handing
    # pods back to kthena's sidecar, then replay the engines (docs/compatibility.md 2.3).
    "SIDECAR_MAPPING_KEYS": False,
    "INDEX_REWRITE_KEYS_PER_STEP": 500,
    "INDEX_REWRITE_SECONDS_PER_RUN": 2.0,
    # The kthena version the router runs: "pr1293" (with PR #1293's tier weights) or "main".
    # The dashboard warns while it and INDEX_VALUE_FORMAT disagree.
    "ROUTER_VERSION": "pr1293",
}


TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


DEPRECATED_KNOBS: dict[str, str] = {"ROUTING_LOAD_FRESH_SECONDS": "LOAD_STALE_SECONDS"}
"""Old knob names still read, as the knob that holds their fact now (`check_knobs` warns)."""


def parse_bool(name: str, text: str) -> bool:
    """A boolean environment variable: a typo such as `DEBUG=ture` is an error, not false."""
    word = text.strip().lower()
    if word not in TRUE + FALSE:
        raise ImproperlyConfigured(f"{name}={text!r}: use one of {', '.join(TRUE + FALSE)}")
    return word in TRUE


def _convert(name: str, value: Any) -> Any:
    default = CONFIG_DEFAULTS.get(name)
    if not isinstance(value, str) or default is None or isinstance(default, str):
        return value
    if isinstance(default, bool):
        return parse_bool(f"KVADMIN_{name}", value)
    try:
        return type(default)(value)
    except ValueError:
        kind = "a whole number" if isinstance(default, int) else "a number"
        raise ImproperlyConfigured(f"KVADMIN_{name}={value!r}: expected {kind}") from None


@cache
def get_config() -> dict[str, Any]:
    """The knobs; ImproperlyConfigured names the first environment variable that does not
    read as its default's type."""
    overrides = dict(getattr(settings, "KVADMIN", {}))
    for old, new in DEPRECATED_KNOBS.items():
        if old in overrides:
            overrides.setdefault(new, overrides.pop(old))
    return CONFIG_DEFAULTS | {name: _convert(name, value) for name, value in overrides.items()}


def knob(name: str) -> Any:
    return get_config()[name]


def settings_knob(name: str, overrides: dict[str, Any]) -> Any:
    """A knob for settings.py itself (the beat schedule), read from the `KVADMIN` dict it is
    building, before Django's settings exist; as strict as `knob`."""
    return _convert(name, overrides.get(name, CONFIG_DEFAULTS[name]))


@register()
def check_knobs(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """`manage.py check` (and `migrate`, which `make run` runs first) names every KVADMIN_
    variable that is misspelt or does not read as its default's type."""
    found: list[CheckMessage] = []
    for name, value in getattr(settings, "KVADMIN", {}).items():
        if new := DEPRECATED_KNOBS.get(name):
            found.append(
                Warning(
                    f"KVADMIN_{name} is deprecated: it is read as KVADMIN_{new}",
                    f"Set KVADMIN_{new} instead (one staleness for routing, pages and alerts).",
                    id="kvadmin.W005",
                )
            )
            name = new
        if name not in CONFIG_DEFAULTS:
            close = difflib.get_close_matches(name, CONFIG_DEFAULTS, n=1)
            hint = f"Did you mean KVADMIN_{close[0]}?" if close else "kvadmin/conf.py lists them."
            found.append(
                Warning(f"KVADMIN_{name} is not a kvadmin setting", hint, id="kvadmin.W001")
            )
            continue
        try:
            _convert(name, value)
        except ImproperlyConfigured as error:
            found.append(Error(str(error), id="kvadmin.E001"))
    if any(message.id == "kvadmin.E001" for message in found):
        return found  # the knobs cannot be read until those are fixed
    return found + _choice_errors() + _probe_errors()


def value_format() -> ValueFormat:
    """The INDEX_VALUE_FORMAT knob (its values are checked at start, `check_knobs`)."""
    return ValueFormat(knob("INDEX_VALUE_FORMAT"))


def router_value_format() -> ValueFormat | None:
    """The value format the ROUTER_VERSION knob's kthena reads right, None if unknown."""
    return ROUTER_VERSIONS.get(knob("ROUTER_VERSION"))


def _choice_errors() -> list[CheckMessage]:
    """The knobs that take one of a few words, and whether the two kthena ones agree."""
    found: list[CheckMessage] = []
    formats = [fmt.value for fmt in ValueFormat]
    if knob("INDEX_VALUE_FORMAT") not in formats:
        message = f"KVADMIN_INDEX_VALUE_FORMAT={knob('INDEX_VALUE_FORMAT')!r}: use one of {formats}"
        found.append(Error(message, id="kvadmin.E002"))
    if router_value_format() is None:
        message = (
            f"KVADMIN_ROUTER_VERSION={knob('ROUTER_VERSION')!r}: use one of {list(ROUTER_VERSIONS)}"
        )
        found.append(Error(message, id="kvadmin.E003"))
    if not found and router_value_format() is not value_format():
        found.append(Warning(format_disagreement(), id="kvadmin.W002"))
    return found


def _probe_errors() -> list[CheckMessage]:
    """Probes need a positive period and timeout; a timeout at or above the period piles runs
    up, and a period at or above HEALTH_STALE_SECONDS shows every engine stale between runs."""
    period, timeout = knob("PROBE_PERIOD_SECONDS"), knob("PROBE_TIMEOUT_SECONDS")
    if period <= 0 or timeout <= 0:
        message = (
            f"KVADMIN_PROBE_PERIOD_SECONDS={period!r}, KVADMIN_PROBE_TIMEOUT_SECONDS={timeout!r}:"
            " both must be above 0"
        )
        return [Error(message, id="kvadmin.E004")]
    found: list[CheckMessage] = []
    if timeout >= period:
        message = (
            f"KVADMIN_PROBE_TIMEOUT_SECONDS={timeout!r} is not below "
            f"KVADMIN_PROBE_PERIOD_SECONDS={period!r}: a dead engine's probe would outlast the "
            "period, and runs that start late expire unrun"
        )
        found.append(Warning(message, id="kvadmin.W003"))
    if period >= knob("HEALTH_STALE_SECONDS"):
        message = (
            f"KVADMIN_PROBE_PERIOD_SECONDS={period!r} is not below "
            f"KVADMIN_HEALTH_STALE_SECONDS={knob('HEALTH_STALE_SECONDS')!r}: every engine would "
            "show stale between probes"
        )
        found.append(Warning(message, id="kvadmin.W004"))
    return found


def format_disagreement() -> str:
    """What goes wrong while the index's value format is not the one the router reads right."""
    if value_format() is ValueFormat.TIERED:
        return (
            'the index writes tiered values ("ts|MEDIUM") but the router runs kthena main, '
            "whose restart filter and garbage collection cannot parse them: it keeps ownership "
            "written before a pod's restart and never collects it. Set "
            "KVADMIN_INDEX_VALUE_FORMAT=legacy, or run kthena with PR #1293 "
            "(KVADMIN_ROUTER_VERSION=pr1293)."
        )
    return (
        'the index writes legacy values ("ts") but the router runs kthena with PR #1293: '
        "its tier weights see no medium and weigh every block at the fallback. Set "
        "KVADMIN_INDEX_VALUE_FORMAT=tiered, or KVADMIN_ROUTER_VERSION=main."
    )


@receiver(setting_changed)
def _reset_config(*, setting: str, **kwargs: Any) -> None:
    if setting == "KVADMIN":
        get_config.cache_clear()
