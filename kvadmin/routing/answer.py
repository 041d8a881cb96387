"""A decision as the API answers it (POST /api/v1/score, GET /api/v1/decisions, the explain
page), declared once: msgspec encodes these structs, and kvadmin/api/openapi.py generates the
document's schemas from them (`msgspec.json.schema_components`), descriptions and limits
included, so the contract is not written a second time by hand.

`decisions.to_api` maps a logged decision onto the fields; `outcomes.decision_answer` adds
predicted vs delivered hits.
"""

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from kvadmin.routing.decisions import CandidateEstimate, Dropped, PodExplanation
from scoring.hashing import DEFAULT_MAX_BLOCKS
from scoring.policy import POLICIES

Input = Literal["token_ids", "prompt", "messages"]
PolicyName = Literal[POLICIES]  # type: ignore[valid-type]  (a tuple of literal names)


class PredictedHits(msgspec.Struct):
    """Cached tokens predicted at decision time. available - achieved is routing loss;
    achieved - delivered.cached_tokens is index staleness."""

    available_tokens: Annotated[
        int, Meta(description="The best candidate's predicted cached tokens.")
    ]
    achieved_tokens: Annotated[int, Meta(description="The chosen pod's predicted cached tokens.")]
    ttft_ms: Annotated[
        float | None,
        Meta(
            description="The chosen pod's predicted time to first token (its wait plus prefill "
            "estimate), ms; null under a policy that does not estimate it."
        ),
    ] = None


class Delivered(msgspec.Struct):
    """What the gateway reported the engine delivered (POST /api/v1/decisions/<id>/outcome)."""

    cached_tokens: int
    prompt_tokens: int
    ttft_ms: float | None
    at: Annotated[float, Meta(description="Unix seconds it was recorded.")]
    served: Annotated[
        str | None,
        Meta(
            description="The pod that served, when a gateway's retry sent the request to "
            "another than `chosen` (the endpoint picker sees it); null otherwise."
        ),
    ] = None


class Decision(msgspec.Struct, kw_only=True):
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
    ]
    tokens_estimated: Annotated[
        bool,
        Meta(
            description="`tokens` is estimated: only the scoring window of a long "
            "prompt was tokenized."
        ),
    ]
    policy: Annotated[PolicyName, Meta(description="The policy that chose.")]
    reason: Annotated[str, Meta(description="Why `chosen` won, in words.")]
    estimates: Annotated[
        list[CandidateEstimate],
        Meta(
            description="The candidates, cheapest first (then pod id): the cheapest "
            "KVADMIN_ROUTING_ESTIMATES_MAX (default 16) and the chosen pod."
        ),
    ]
    stale_loads: Annotated[
        list[str],
        Meta(
            description="Candidates whose engine load was stale or absent: their wait is "
            "kvadmin's own virtual queue alone."
        ),
    ]
    predicted: PredictedHits
    delivered: Annotated[
        Delivered | None, Meta(description="The outcome the gateway posted; null until it does.")
    ]
