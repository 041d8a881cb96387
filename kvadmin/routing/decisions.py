"""The decision log: every scoring decision, with enough to explain it and to replay it.

Decisions go to one capped Redis stream (`XADD MAXLEN ~ DECISIONS_MAX`), one entry per decision
with a single field "d": the decision as JSON (msgspec). The API, the CLI and the live feed all
read it from here; the stream's entry id (`log_id`) orders and addresses entries.

Replay: a decision keeps, per scored pod, the media of its matched blocks in block order as
runs, plus the number of blocks and the first block's hash. That is everything the score and
the choice depend on besides the weights, so `rescore` gives the decision that other weights
would have made, with the same arithmetic as the live path (`scoring.score.score_walk`).
"""

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import redis
from redis.client import Pipeline

from kvadmin.conf import knob
from kvadmin.redis_clients import index_client
from scoring import keys
from scoring.choice import choose
from scoring.score import PodScore, PrefixWalk, score_walk
from scoring.weights import TierWeights

_SCAN_PAGE = 200


class PodExplanation(msgspec.Struct, kw_only=True):
    """One scored pod (it holds the request's first block) and why it scored what it did."""

    pod: str
    score: int
    matched_blocks: int
    weighted_sum: float
    media: dict[str, int]
    """Matched blocks per medium; "" stands for no medium."""
    runs: list[tuple[str | None, int]]
    """The media of the matched blocks in block order, run-length encoded: [["GPU", 40],
    ["CPU", 8]]. None: no medium."""


class Dropped(msgspec.Struct, kw_only=True):
    non_candidates: list[str]
    """Owners of the first block that were not candidates."""
    stale: list[str]
    """Candidates whose ownership predates their last restart (compatibility.md 2.4 step 1)."""


class CandidateEstimate(msgspec.Struct, kw_only=True):
    """One candidate as the `ttft` policy priced it (scoring.policy), in seconds: cost =
    wait_s + prefill_s + work_penalty_s."""

    pod: str
    matched_blocks: int
    speculative_blocks: int
    """Of `matched_blocks`, those only kvadmin's own recent routing says the pod holds."""
    cached_tokens: int
    uncached_tokens: int
    wait_s: float
    """Predicted wait before the prefill starts (see scoring.route_state)."""
    queue_wait_s: float
    """The virtual queue's part of it."""
    engine_waiting: int | None
    """The engine's waiting requests when its scraped load was fresh; None when stale."""
    prefill_s: float
    """S_est, tier reload included."""
    reload_s: float
    work_penalty_s: float
    cost_s: float
    load_stale: bool
    """The engine's load was stale or absent: the virtual queue alone priced the wait."""
    running: int = 0
    """The running requests that priced the decode slowdown."""
    queued: float = 0.0
    """The requests waiting on the pod, which its work penalty charges (scoring.policy)."""
    wait_factor: float = 1.0
    """The delivered correction `wait_s` includes (scoring.route_state)."""
    runs: list[tuple[str | None, int]] = []
    """The media of the blocks the pod was priced as holding, in block order (speculative
    blocks as GPU): with `wait_s` and `running`, what a what-if needs to price the pod again
    under other weights and parameters (kvadmin.weights.whatif)."""


class Decision(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One scoring of one request over its candidate pods: inputs, result and timings."""

    id: str
    ts: float
    """Unix seconds of the decision."""
    request_id: str | None
    model: str
    input: str
    """What the caller sent: "token_ids", "prompt" or "messages"."""
    n_tokens: int
    n_blocks: int
    """Hashed blocks (at most MAX_BLOCKS): the score's denominator."""
    first_block: int
    """Standardized hash of block 0 (0 for no tokens): the tie-break key."""
    longest_match: int
    candidates: list[str]
    chosen: str | None
    tie_break: bool
    """The rendezvous tie-break chose (a tie, or no hit at all), not the score alone."""
    scores: list[PodExplanation]
    """Best first, as the scoring library orders them."""
    dropped: Dropped
    weights_version: int
    weights: dict[str, float]
    """The weight each medium among the matched blocks had ("" for no medium)."""
    timings_ms: dict[str, float]
    """tokenize, hash, index (the Redis read), score, total (everything but recording)."""
    tokenizer: str = ""
    """Where the token ids came from: "given" (token_ids), "local" (the model's tokenizer
    files), "engine:<pod>" (that engine's /tokenize), "cache" (an earlier request's)."""
    tokens_estimated: bool = False
    """`n_tokens` is estimated: the local tokenizer tokenized only the scoring window of a
    long prompt (`routing.local_tokenize`)."""
    tokenizer_fallback: str = ""
    """Why the model's local tokenizer did not tokenize: "template", "unavailable",
    "disabled" (empty when it did, or there is none)."""
    policy: str = ""
    """The routing policy that chose ("ttft" or "kthena"; "" in entries from before policies,
    chosen as "kthena" does)."""
    reason: str = ""
    """Why the chosen pod won, in words."""
    estimates: list[CandidateEstimate] = []
    """The candidates' TTFT estimates, cheapest first (then pod id): the cheapest
    ROUTING_ESTIMATES_MAX and the chosen pod's."""
    stale_loads: list[str] = []
    """Candidates whose engine load was stale or absent."""
    requester: str = ""
    """Who asked for it (`routing.requesters`), the one that may report its outcome; "" in
    entries from before requesters were recorded."""
    log_id: str = ""
    """The stream entry id once recorded and read back; never stored in the entry."""

    def score_of(self, pod: str | None) -> PodExplanation | None:
        return next((scored for scored in self.scores if scored.pod == pod), None)

    def estimate_of(self, pod: str | None) -> "CandidateEstimate | None":
        return next((estimate for estimate in self.estimates if estimate.pod == pod), None)

    def involves(self, pod: str) -> bool:
        """The pod was chosen or scored (held the first block)."""
        return pod == self.chosen or any(scored.pod == pod for scored in self.scores)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Decision)


def encode(decision: Decision) -> bytes:
    return _encoder.encode(decision)


def decode(data: bytes | str, log_id: str = "") -> Decision:
    """Raises msgspec.ValidationError / DecodeError for an entry that is not a Decision."""
    decision = _decoder.decode(data)
    decision.log_id = log_id
    return decision


def to_api(decision: Decision) -> dict[str, Any]:
    """The fields of the API's decision (`routing.answer.Decision`) but predicted vs delivered
    hits: the one mapping from the log's names to the API's."""
    return {
        "decision_id": decision.id,
        "ts": decision.ts,
        "request_id": decision.request_id,
        "model": decision.model,
        "input": decision.input,
        "tokens": decision.n_tokens,
        "blocks": decision.n_blocks,
        "first_block": decision.first_block,
        "longest_match": decision.longest_match,
        "candidates": decision.candidates,
        "chosen": decision.chosen,
        "tie_break": decision.tie_break,
        "scores": decision.scores,
        "dropped": decision.dropped,
        "weights_version": decision.weights_version,
        "weights": decision.weights,
        "timings_ms": decision.timings_ms,
        "tokenizer": decision.tokenizer,
        "tokens_estimated": decision.tokens_estimated,
        "policy": decision.policy or "kthena",
        "reason": decision.reason,
        "estimates": decision.estimates,
        "stale_loads": decision.stale_loads,
    }


def rescore(decision: Decision, weights: TierWeights) -> tuple[str | None, tuple[PodScore, ...]]:
    """What the decision would have been under `weights`: the chosen pod (same tie-break) and
    the scored pods, best first, exactly as live scoring computes them from the same walk."""
    walk = PrefixWalk({scored.pod: tuple(scored.runs) for scored in decision.scores})
    result = score_walk(walk, decision.n_blocks, weights)
    chosen, _ = choose(result.scores, decision.candidates, decision.first_block)
    return chosen, result.pods


def append(decision: Decision, client: redis.Redis | None = None) -> str:
    """Record a decision; returns its log id. One round trip."""
    pipeline = (client or index_client()).pipeline(transaction=False)
    queue_append(pipeline, decision)
    return pipeline.execute()[0]


def queue_append(pipeline: Pipeline, decision: Decision) -> None:
    """Add the XADD of a decision to `pipeline` (its reply is the log id). Trimming is
    approximate (`MAXLEN ~`): Redis drops whole macro nodes, so it costs next to nothing."""
    pipeline.xadd(
        keys.DECISIONS_KEY, {"d": encode(decision)}, maxlen=knob("DECISIONS_MAX"), approximate=True
    )


def recent(
    limit: int = 50,
    model: str | None = None,
    pod: str | None = None,
    client: redis.Redis | None = None,
    *,
    where: Callable[[Decision], bool] | None = None,
) -> list[Decision]:
    """The newest `limit` decisions, newest first; `model` keeps that model's, `pod` those the
    pod was chosen or scored in, `where` those it accepts. Scans back through the log until
    enough match."""
    found: list[Decision] = []
    if limit <= 0:
        return found
    for decision in _newest_first(client or index_client()):
        if (
            (model is None or decision.model == model)
            and (pod is None or decision.involves(pod))
            and (where is None or where(decision))
        ):
            found.append(decision)
            if len(found) >= limit:
                break
    return found


def chosen_score(decision: Decision) -> int:
    return scored.score if (scored := decision.score_of(decision.chosen)) else 0


def get(log_id: str, client: redis.Redis | None = None) -> Decision | None:
    """The decision recorded under `log_id`, None when the log no longer has it."""
    client = client or index_client()
    try:
        entries = client.xrange(keys.DECISIONS_KEY, log_id, log_id)
    except redis.ResponseError:  # not a stream id
        return None
    return next(decoded(entries), None)


def _newest_first(client: redis.Redis) -> Iterator[Decision]:
    for page in newest_pages(client):
        yield from decoded(page)


def newest_pages(client: redis.Redis) -> Iterator[list[tuple[str, dict[str, str]]]]:
    """The log's entries, newest first, a page (one XREVRANGE) at a time: for readers that
    decode only the fields they need (`routing.prediction_error`)."""
    upper = "+"
    while True:
        entries = client.xrevrange(keys.DECISIONS_KEY, max=upper, count=_SCAN_PAGE)
        yield entries
        if len(entries) < _SCAN_PAGE:
            return
        upper = f"({entries[-1][0]}"


def decoded(entries: list[tuple[str, dict[str, str]]]) -> Iterator[Decision]:
    """Entries as decisions, skipping any that are not one (written by another version)."""
    for log_id, fields in entries:
        try:
            yield decode(fields["d"], log_id)
        except (KeyError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
