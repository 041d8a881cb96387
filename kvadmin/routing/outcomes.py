"""Delivered hits: what the engine reported for a routed request, beside what was predicted.

A gateway that asked for a decision posts its outcome (`POST /api/v1/decisions/<id>/outcome`):
the prompt tokens and cached tokens of the engine's usage, and its time to first token. Each
outcome is kept once per decision, as long as the decision log keeps the decision, and adds
three tallies per model and chosen pod, so that an operator can tell the gaps apart:

- available: the best candidate's predicted cached tokens at decision time (the most any
  choice could have hit, as far as the index and kvadmin's own recent routing knew);
- achieved: the chosen pod's predicted cached tokens;
- delivered: the cached tokens the engine reported.

An outcome with a `ttft_ms` also puts the delivered time to first token beside the predicted one
(the chosen pod's wait plus prefill estimate), in two histograms per model and pod, with the
prediction's error abs(predicted - delivered) / delivered in a third
(families.OUTCOME_TIMINGS), and in the per-minute buckets: delivered above predicted is a fleet
slower than kvadmin's TTFT parameters say (refit them on /weights/), or a queue kvadmin did not
see.

available - achieved is routing loss (the policy traded hits for load), achieved - delivered
is index staleness (the index promised blocks the engine no longer had), and a low available
over prompt tokens is a workload without reuse.

An outcome is bound to its decision: the decision records who asked for it
(`Decision.requester`, `routing.requesters`), and `report_async` takes the rule of who may
report (`requested_by`: the requester itself; the API passes the calling token, the endpoint
picker its own identity), so another token's post is a 404. Its counts must fit the
decision's (`check_plausible`): a post that cannot be the decision's outcome is refused
before anything is recorded, so no one post can move the counters by more than one request.

Storage (scoring/keys.py): the decision id index written with each logged decision
(route_record.lua), the outcomes HASH, counters in the metric families (OUTCOME_TALLIES) and
per-minute buckets for the dashboard, all written by one script (outcome_record.lua) so that a
repeated post is refused atomically across processes and never counted twice.
"""

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import redis
import redis.asyncio

from kvadmin.conf import knob
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from kvadmin.metrics.recorder import HITS_TTL_SECONDS, bucket_of, outcome_minute_key
from kvadmin.routing import answer, decisions, requesters
from kvadmin.routing.decisions import CandidateEstimate, Decision
from scoring import keys
from scoring.route_state import (
    PREFILL_FACTOR_BOUNDS,
    PREFILL_OFFSET_BOUNDS,
    PREFILL_OFFSET_MIN_OUTCOMES,
    PREFILL_OFFSET_RIDGE,
    WAIT_FACTOR_BOUNDS,
    WAIT_LEARNING,
    WAIT_MIN_SHARE,
    WAIT_STEP_BOUND,
    uncorrected_prefill,
)
from scoring.scripts import package_script

DECISION_ID = re.compile(r"[0-9a-f]{1,64}")
"""What `routing.service` makes a decision id of: hex digits (time, then randomness)."""
MAX_BODY_BYTES: Final = 1024
MAX_TOKENS: Final = 2**31 - 1
"""Beyond any context window; it keeps the counters' HINCRBY far from overflowing."""
MAX_TTFT_MS: Final = 86_400_000.0
FIELDS: Final = ("cached_tokens", "prompt_tokens", "ttft_ms")
PROMPT_SLACK_TOKENS: Final = 64
"""How far the engine's `prompt_tokens` may lie from the decision's token count, at least: a
BOS or EOS token one side adds, a chat template's generation prompt, and the default system
prompt some templates write when the messages have none (Llama 3.1's dates, Qwen 2.5's
"You are Qwen..."; about 20-30 tokens each), when the gateway scored the prompt as text and
the engine rendered it as chat, or the other way round."""
PROMPT_SLACK_SHARE: Final = 0.05
"""... and beyond that a share of the count: templates that wrap every message."""
ESTIMATED_SLACK_SHARE: Final = 0.5
"""The share for a count the local tokenizer estimated from a window of a long prompt
(`routing.local_tokenize`): tokens per character vary along a prompt."""

_RECORD: Final = package_script(__file__, "outcome_record")


class InvalidOutcome(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ImplausibleOutcome(InvalidOutcome):
    """The outcome cannot be that of the decision: its counts do not fit the decision's."""


ReportRule = Callable[[Decision], bool]
"""Who may report a decision's outcome: true for the decisions the reporter may report."""


def requested_by(requester: str) -> ReportRule:
    """The rule for a reporter: the decisions it asked for. Decisions logged before
    requesters were recorded name none: any reporter with the `score` scope may report those,
    as before (the decision log is capped, so they leave it soon after an upgrade)."""
    return lambda decision: decision.requester in (requester, requesters.UNRECORDED)


class Outcome(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the engine's response reported for the request a decision routed."""

    cached_tokens: int
    prompt_tokens: int
    ttft_ms: float | None = None
    at: float = 0.0
    """Unix seconds it was recorded."""
    served: str | None = None
    """The pod that served the request, when the recorder knows it and it is not the chosen
    one (a gateway's retry went to a fallback): the endpoint picker records it from
    `x-gateway-destination-endpoint-served`."""


@dataclass(frozen=True, slots=True)
class Predicted:
    """The decision's predicted cached tokens, the best candidate's and the chosen pod's, and
    the chosen pod's predicted time to first token."""

    available: int
    achieved: int
    ttft_ms: float | None = None
    """The chosen pod's predicted wait plus prefill estimate (its cost without the work
    penalty, which prices later requests, not this one); None without an estimate."""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Outcome)


def parse(body: object) -> Outcome:
    """An outcome from a decoded JSON body; InvalidOutcome naming the field at fault."""
    if not isinstance(body, dict):
        raise InvalidOutcome("the body must be a JSON object")
    unknown = sorted(str(name) for name in body if name not in FIELDS)
    if unknown:
        raise InvalidOutcome(f"unknown fields: {', '.join(unknown)}"[:300], unknown[0][:100])
    prompt = _tokens(body, "prompt_tokens")
    cached = _tokens(body, "cached_tokens")
    ttft = body.get("ttft_ms")
    if ttft is not None and (
        type(ttft) not in (int, float) or not math.isfinite(ttft) or not 0 <= ttft <= MAX_TTFT_MS
    ):
        raise InvalidOutcome(
            f"`ttft_ms` must be a number of milliseconds from 0 to {MAX_TTFT_MS:.0f}", "ttft_ms"
        )
    return Outcome(
        cached_tokens=cached,
        prompt_tokens=prompt,
        ttft_ms=None if ttft is None else float(ttft),
    )


def _tokens(body: dict, name: str) -> int:
    value = body.get(name)
    if value is None:
        raise InvalidOutcome(f"`{name}` is required", name)
    if type(value) is not int or not 0 <= value <= MAX_TOKENS:
        raise InvalidOutcome(f"`{name}` must be an integer from 0 to {MAX_TOKENS}", name)
    return value


def prompt_slack(decision: Decision) -> int:
    """How far `prompt_tokens` may lie from the decision's token count (PROMPT_SLACK_*)."""
    share = ESTIMATED_SLACK_SHARE if decision.tokens_estimated else PROMPT_SLACK_SHARE
    return max(PROMPT_SLACK_TOKENS, math.ceil(decision.tokens * share))


def check_plausible(decision: Decision, outcome: Outcome) -> None:
    """ImplausibleOutcome unless `prompt_tokens` lies within `prompt_slack` of the decision's
    token count and `cached_tokens` is at most both counts."""
    prompt, cached, tokens = outcome.prompt_tokens, outcome.cached_tokens, decision.tokens
    slack = prompt_slack(decision)
    if abs(prompt - tokens) > slack:
        raise ImplausibleOutcome(
            f"`prompt_tokens` ({prompt}) is not within {slack} of the decision's {tokens} tokens",
            "prompt_tokens",
        )
    if cached > min(prompt, tokens):
        raise ImplausibleOutcome(
            f"`cached_tokens` ({cached}) exceeds `prompt_tokens` ({prompt}) or the "
            f"decision's {tokens} tokens",
            "cached_tokens",
        )


def predicted(decision: Decision, block_size: int) -> Predicted:
    """From the decision as recorded: the `ttft` estimates' cached tokens (speculative blocks
    included, capped as engines cap them: routing.service's estimate), and for scored pods
    beyond the recorded estimates their matched blocks, capped the same way."""
    cap = max(decision.tokens - 1, 0)
    hits = {scored.pod: min(scored.matched_blocks * block_size, cap) for scored in decision.scores}
    chosen = None
    for estimate in decision.estimates:
        hits[estimate.pod] = estimate.cached_tokens
        if estimate.pod == decision.chosen:
            chosen = estimate
    return Predicted(
        available=max(hits.values(), default=0),
        achieved=hits.get(decision.chosen or "", 0),
        ttft_ms=None if chosen is None else (chosen.wait_s + chosen.prefill_s) * 1000,
    )


async def find_async(decision_id: str, client: redis.asyncio.Redis) -> Decision | None:
    """The logged decision of that id, None when the log does not (or no longer) hold it."""
    if not DECISION_ID.fullmatch(decision_id):
        return None
    logged_ms = await client.zscore(keys.DECISION_IDS_KEY, decision_id)
    if logged_ms is None:
        return None
    # Entries of the same millisecond are few: the decision is among them.
    millisecond = str(int(logged_ms))
    entries = await client.xrange(keys.DECISIONS_KEY, millisecond, millisecond)
    return _among(entries, decision_id)


def _among(entries: list[tuple[str, dict[str, str]]], decision_id: str) -> Decision | None:
    return next((d for d in decisions.decoded(entries) if d.decision_id == decision_id), None)


async def report_async(
    client: redis.asyncio.Redis,
    decision_id: str,
    outcome: Outcome,
    may_report: ReportRule,
    block_size: int,
) -> tuple[str, Decision | None]:
    """Record the outcome of a decision the reporter may report (`may_report`), through
    `record_async`: its result and the decision ("unknown" and None for a decision the log
    does not hold or the reporter may not report: the two are told apart to no one). Raises
    ImplausibleOutcome, recording nothing. Every reporter (the API, the endpoint picker)
    goes through here."""
    decision = await find_async(decision_id, client)
    if decision is None or not may_report(decision):
        return "unknown", None
    return await record_async(client, decision, outcome, block_size), decision


def record(client: redis.Redis, decision: Decision, outcome: Outcome, block_size: int) -> str:
    """Keep the outcome and add it to the accounting, once: "recorded", "repeated" (an outcome
    was already recorded) or "unknown" (the decision left the log meanwhile). Raises
    ImplausibleOutcome (`check_plausible`), recording nothing."""
    script_keys, args = _record_input(decision, outcome, block_size)
    return _text(_RECORD(client, script_keys, args))


async def record_async(
    client: redis.asyncio.Redis, decision: Decision, outcome: Outcome, block_size: int
) -> str:
    """`record` through an asyncio client."""
    script_keys, args = _record_input(decision, outcome, block_size)
    return _text(await _RECORD.call_async(client, script_keys, args))


def _record_input(
    decision: Decision, outcome: Outcome, block_size: int
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of outcome_record.lua (sets the outcome's `at`)."""
    check_plausible(decision, outcome)
    outcome.at = time.time()
    hits = predicted(decision, block_size)
    amounts = {
        "outcomes": 1,
        "prompt": outcome.prompt_tokens,
        "available": hits.available,
        "achieved": hits.achieved,
        "delivered": outcome.cached_tokens,
    }
    tallies = families.OUTCOME_TALLIES
    args: list[Any] = [
        decision.decision_id,
        _encoder.encode(outcome),
        label_field((decision.model, decision.chosen or "")),
        HITS_TTL_SECONDS,
        len(tallies),
    ]
    for name in tallies:
        args += [name, amounts[name]]
    timings = _timings(outcome.ttft_ms, hits.ttft_ms)
    args.append(len(timings))
    for name, (observed, minute_sum) in timings.items():
        family = families.OUTCOME_TIMINGS[name]
        args += [name, bucket_of(family, observed), repr(observed), repr(minute_sum)]
    script_keys = [
        keys.DECISION_IDS_KEY,
        keys.OUTCOMES_KEY,
        outcome_minute_key(int(outcome.at // 60)),
        *(family.key for family in tallies.values()),
        *(families.OUTCOME_TIMINGS[name].key for name in timings),
        keys.OUTCOME_LOG_KEY,
    ]
    chosen = decision.estimate_of(decision.chosen) if decision.chosen else None
    logged = _logged(decision, chosen) if outcome.ttft_ms is not None else ""
    args += [logged, knob("DECISIONS_MAX")]
    if outcome.ttft_ms is not None and chosen is not None:
        # The delivered time corrects the pod's wait or its prefill estimates
        # (scoring.route_state: corrected_wait_log, corrected_prefill_fit).
        script_keys.append(keys.queue_key(chosen.pod))
        args += [repr(chosen.wait_s), repr(chosen.prefill_s), repr(outcome.ttft_ms / 1000)]
        args += [repr(WAIT_LEARNING), repr(WAIT_STEP_BOUND), repr(WAIT_MIN_SHARE)]
        args += [repr(math.log(bound)) for bound in WAIT_FACTOR_BOUNDS]
        args.append(str(decision.weights_version))
        args += [repr(math.log(bound)) for bound in PREFILL_FACTOR_BOUNDS]
        uncorrected = uncorrected_prefill(
            chosen.prefill_s, chosen.prefill_factor, chosen.prefill_offset_s
        )
        args += [repr(uncorrected), PREFILL_OFFSET_MIN_OUTCOMES, repr(PREFILL_OFFSET_RIDGE)]
        args += [repr(bound) for bound in PREFILL_OFFSET_BOUNDS]
        # The factor the decision's wait included: the step is taken against the factor now.
        low, high = WAIT_FACTOR_BOUNDS
        args.append(repr(math.log(min(max(chosen.wait_factor, low), high))))
    return script_keys, args


def _logged(decision: Decision, chosen: CandidateEstimate | None) -> bytes | str:
    """The decision as the outcome log keeps it (keys.OUTCOME_LOG_KEY): what a comparison
    reads of it (`prediction_error.Routed`: the chosen pod's estimate), the rest left out so
    an entry stays small; "" (not logged) without a chosen pod's estimate."""
    if chosen is None:
        return ""
    return decisions.encode(
        msgspec.structs.replace(decision, estimates=[chosen], scores=[], candidates=[])
    )


def _timings(
    delivered_ms: float | None, predicted_ms: float | None
) -> dict[str, tuple[float, float]]:
    """What a timed outcome observes (families.OUTCOME_TIMINGS): name -> (the histogram's
    value, the per-minute bucket's)."""
    if delivered_ms is None or predicted_ms is None:
        return {}
    timings = {
        "ttft_ms": (delivered_ms / 1000, delivered_ms),
        "predicted_ttft_ms": (predicted_ms / 1000, predicted_ms),
    }
    if delivered_ms > 0:
        error = abs(predicted_ms - delivered_ms) / delivered_ms
        timings["ttft_error"] = (error, error)
    return timings


def _text(reply: bytes | str) -> str:
    return reply.decode() if isinstance(reply, bytes) else reply


def outcomes_of(client: redis.Redis, decision_ids: list[str]) -> dict[str, Outcome]:
    """The recorded outcomes of these decisions (those without one are left out)."""
    if not decision_ids:
        return {}
    found = {}
    for decision_id, raw in zip(
        decision_ids, client.hmget(keys.OUTCOMES_KEY, decision_ids), strict=True
    ):
        if raw is None:
            continue
        try:
            found[decision_id] = _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return found


def decision_answer(decision: Decision, outcome: Outcome | None = None) -> dict[str, Any]:
    """A decision as the API answers it (POST /api/v1/score, GET /api/v1/decisions, the
    explain page): predicted vs delivered hits beside the decision."""
    return answer.answer(decision, *hits_answer(decision, outcome, knob("BLOCK_SIZE")))


def hits_answer(
    decision: Decision, outcome: Outcome | None, block_size: int
) -> tuple[answer.PredictedHits, answer.Delivered | None]:
    """Predicted vs delivered, as a decision's API answer shows it (`delivered` is None until
    the outcome arrives)."""
    hits = predicted(decision, block_size)
    delivered = None
    if outcome is not None:
        delivered = answer.Delivered(
            cached_tokens=outcome.cached_tokens,
            prompt_tokens=outcome.prompt_tokens,
            ttft_ms=outcome.ttft_ms,
            at=outcome.at,
            served=outcome.served,
        )
    return answer.PredictedHits(hits.available, hits.achieved, hits.ttft_ms), delivered
