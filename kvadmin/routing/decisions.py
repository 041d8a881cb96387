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
from typing import Annotated, Literal

import msgspec
import redis
from msgspec import Meta
from redis.client import Pipeline

from kvadmin.conf import knob
from kvadmin.redis_clients import index_client
from scoring import keys
from scoring.choice import choose
from scoring.hashing import DEFAULT_MAX_BLOCKS
from scoring.policy import POLICIES
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
    wait_s + prefill_s + work_penalty_s. wait_s includes the pod's delivered wait correction
    (wait_factor), prefill_s its delivered prefill correction (prefill_factor, prefill_offset_s):
    learned from the pod's delivered TTFTs, none until it has any (scoring.route_state)."""

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
    prefill_factor: float = 1.0
    """The delivered correction `prefill_s` includes (scoring.route_state)."""
    prefill_offset_s: float = 0.0
    """The seconds the same correction adds to `prefill_s` (scoring.route_state.PrefillFit)."""
    runs: list[tuple[str | None, int]] = []
    """The media of the blocks the pod was priced as holding, in block order (speculative
    blocks as GPU): with `wait_s` and `running`, what a what-if needs to price the pod again
    under other weights and parameters (kvadmin.weights.whatif)."""


Input = Literal["token_ids", "prompt", "messages"]
PolicyName = Literal[POLICIES]  # type: ignore[valid-type]  (a tuple of literal names)


class Decision(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One scoring of one request: the chosen pod, every scored candidate and why."""

    decision_id: Annotated[
        str, Meta(description="Names the decision (POST /api/v1/decisions/<id>/outcome takes it).")
    ]
    ts: Annotated[float, Meta(description="Unix seconds.")]
    request_id: str | None
    model: str
    input: Annotated[Input, Meta(description="Which input the request gave.")]
    tokens: Annotated[int, Meta(description="Prompt tokens (estimated when `tokens_estimated`).")]
    blocks: Annotated[
        int,
        Meta(
            description=f"Hashed blocks (at most KVADMIN_MAX_BLOCKS, default {DEFAULT_MAX_BLOCKS})."
        ),
    ]
    first_block: Annotated[int, Meta(description="Hash of block 0 (the tie-break key).")]
    longest_match: int
    candidates: list[str]
    chosen: str | None
    tie_break: Annotated[
        bool, Meta(description="Chosen by rendezvous hashing of first_block among tied pods.")
    ]
    scores: Annotated[list[PodExplanation], Meta(description="The scored pods, best first.")]
    dropped: Dropped
    weights_version: int
    weights: Annotated[
        dict[str, float],
        Meta(description='The weight of each medium among the matched blocks ("": none).'),
    ]
    timings_ms: Annotated[
        dict[str, float],
        Meta(description="tokenize, hash, index, score, total (everything but recording)."),
    ]
    tokenizer: Annotated[
        str,
        Meta(
            description="Where the token ids came from: given, local, cache or "
            "engine:<pod> (its /tokenize)."
        ),
    ] = ""
    tokens_estimated: Annotated[
        bool,
        Meta(
            description="`tokens` is estimated: only the scoring window of a long "
            "prompt was tokenized."
        ),
    ] = False
    tokenizer_fallback: str = ""
    """Why the model's local tokenizer did not tokenize: "template", "unavailable",
    "disabled" (empty when it did, or there is none). Only the log keeps it (`LOG_ONLY`)."""
    policy: Annotated[PolicyName, Meta(description="The policy that chose.")] = "kthena"
    """The default reads entries from before policies, chosen as "kthena" does."""
    reason: Annotated[str, Meta(description="Why `chosen` won, in words.")] = ""
    estimates: Annotated[
        list[CandidateEstimate],
        Meta(
            description="The candidates, cheapest first (then pod id): the cheapest "
            "KVADMIN_ROUTING_ESTIMATES_MAX (default 16) and the chosen pod."
        ),
    ] = []
    stale_loads: Annotated[
        list[str],
        Meta(
            description="Candidates whose engine load was stale or absent: their wait is "
            "kvadmin's own virtual queue alone."
        ),
    ] = []
    requester: str = ""
    """Who asked for it (`routing.requesters`), the one that may report its outcome; "" in
    entries from before requesters were recorded. Only the log keeps it (`LOG_ONLY`)."""
    log_id: str = ""
    """The stream entry id once recorded and read back; never stored in the entry."""

    def score_of(self, pod: str | None) -> PodExplanation | None:
        return next((scored for scored in self.scores if scored.pod == pod), None)

    def estimate_of(self, pod: str | None) -> "CandidateEstimate | None":
        return next((estimate for estimate in self.estimates if estimate.pod == pod), None)

    def involves(self, pod: str) -> bool:
        """The pod was chosen or scored (held the first block)."""
        return pod == self.chosen or any(scored.pod == pod for scored in self.scores)


LOG_ONLY = ("tokenizer_fallback", "requester", "log_id")
"""The fields kvadmin keeps for itself (the fallback counter, who may report the outcome,
where the entry sits) and the API's answer leaves out (`routing.answer`)."""

RENAMED = {"id": "decision_id", "n_tokens": "tokens", "n_blocks": "blocks"}
"""Names of entries logged before the log took the API's names: old name -> field."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Decision)


def encode(decision: Decision) -> bytes:
    return _encoder.encode(decision)


def decode(data: bytes | str, log_id: str = "") -> Decision:
    """Raises msgspec.ValidationError / DecodeError for an entry that is not a Decision.

    An entry of the old names fails the typed decoding (no `decision_id`); only then is it
    read as a plain object and renamed, so current entries pay nothing for old ones."""
    try:
        decision = _decoder.decode(data)
    except msgspec.ValidationError:
        fields = msgspec.json.decode(data)
        if not isinstance(fields, dict) or not RENAMED.keys() <= fields.keys():
            raise
        decision = msgspec.convert(
            {RENAMED.get(name, name): value for name, value in fields.items()}, Decision
        )
    decision.log_id = log_id
    return decision


def rescore(decision: Decision, weights: TierWeights) -> tuple[str | None, tuple[PodScore, ...]]:
    """What the decision would have been under `weights`: the chosen pod (same tie-break) and
    the scored pods, best first, exactly as live scoring computes them from the same walk."""
    walk = PrefixWalk({scored.pod: tuple(scored.runs) for scored in decision.scores})
    result = score_walk(walk, decision.blocks, weights)
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
