"""A decision as the API answers it (POST /api/v1/score, GET /api/v1/decisions, the explain
page): the logged `Decision` itself, less the fields only the log keeps (`decisions.LOG_ONLY`),
with predicted vs delivered hits after it. msgspec encodes it, and kvadmin/api/openapi.py
generates the document's schemas from the same structs (`msgspec.json.schema_components`,
then `schema`), descriptions and limits included, so the contract is not written a second time
by hand.
"""

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from kvadmin.routing.decisions import LOG_ONLY, Decision


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


def answer(
    decision: Decision, predicted: PredictedHits, delivered: Delivered | None
) -> dict[str, Any]:
    """The decision's answer: its fields in their order but `LOG_ONLY`, then `predicted` and
    `delivered` (null until the outcome arrives). Every key is always there."""
    shown = msgspec.structs.asdict(decision)
    for name in LOG_ONLY:
        del shown[name]
    shown["predicted"] = predicted
    shown["delivered"] = delivered
    return shown


def schema(decision: dict[str, Any]) -> dict[str, Any]:
    """The answer's schema from `Decision`'s generated one: as `answer` shapes it, without the
    log's fields and the defaults (every key is always answered), with predicted and
    delivered."""
    properties = {
        name: {key: value for key, value in field.items() if key != "default"}
        for name, field in decision["properties"].items()
        if name not in LOG_ONLY
    }
    properties["predicted"] = {"$ref": "#/components/schemas/PredictedHits"}
    properties["delivered"] = {
        "anyOf": [{"$ref": "#/components/schemas/Delivered"}, {"type": "null"}],
        "description": "The outcome the gateway posted; null until it does.",
    }
    shown = [name for name in Decision.__struct_fields__ if name not in LOG_ONLY]
    return {**decision, "properties": properties, "required": [*shown, "predicted", "delivered"]}
