"""Writing a routing decision: the decision log entry and the chosen pod's routing state
(virtual queue, in-flight entry, speculative blocks) in one atomic script, route_record.lua,
queued on the caller's pipeline so that it shares the round trip of the decision's metrics.

The script goes by EVALSHA as a plain pipeline command (`scoring.scripts`): when the server does
not know it yet (first use, restart, SCRIPT FLUSH), the pipeline's reply is a NOSCRIPT error;
`finish` then loads it and runs it alone, once.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import redis
import redis.asyncio
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline

from scoring.keys import (
    DECISION_IDS_KEY,
    DECISIONS_KEY,
    OUTCOMES_KEY,
    in_flight_key,
    queue_key,
    speculative_keys,
)
from scoring.scripts import script

RECORD: Final = script("route_record")
Queued = tuple[list[Any], list[Any]]
"""The script's KEYS and ARGV, as `queue_record` queued them."""
MEAN_WEIGHT: Final = 0.2
"""Weight of a new prefill in the queue's moving mean of predicted prefills."""


@dataclass(frozen=True, slots=True)
class RouteAdvance:
    """What routing one request to `pod` adds to its state."""

    model: str
    pod: str
    decision_id: str
    prefill_s: float
    """The request's predicted prefill on the pod (S_est): how far its queue advances."""
    blocks: Sequence[int]
    """The request's block hashes: speculative entries of the pod until `speculative_ttl_s`
    after the request's predicted prefill end."""
    speculative_ttl_s: float
    speculative_max: int
    """The most speculative entries the model keeps (the earliest-expiring go first)."""
    in_flight_window_s: float
    in_flight_max: int


@dataclass(frozen=True, slots=True)
class Recorded:
    log_id: str | None
    prefill_start_ms: float
    prefill_end_ms: float


def queue_record(
    pipeline: Pipeline | AsyncPipeline, advance: RouteAdvance, entry: bytes | None, maxlen: int
) -> Queued:
    """Queue the script on `pipeline`; returns its input for `finish`. `entry`: the decision
    log entry, None to leave the decision out of the log."""
    keys = [
        DECISIONS_KEY,
        queue_key(advance.pod),
        in_flight_key(advance.pod),
        *speculative_keys(advance.model),
        DECISION_IDS_KEY,
        OUTCOMES_KEY,
    ]
    args = [
        entry or b"",
        maxlen,
        f"{advance.prefill_s * 1000:.3f}",
        advance.decision_id,
        round(advance.in_flight_window_s * 1000),
        advance.in_flight_max,
        round(advance.speculative_ttl_s * 1000),
        advance.speculative_max,
        MEAN_WEIGHT,
        advance.pod,
        *advance.blocks,
    ]
    RECORD.queue(pipeline, keys, args)
    return keys, args


def finish(client: redis.Redis, reply: Any, queued: Queued) -> Recorded:
    """The script's outcome from its pipeline `reply` (run with raise_on_error=False); a
    NOSCRIPT reply loads the script and runs it again, alone. Raises any other error."""
    return _recorded(RECORD.finish(client, reply, *queued))


async def finish_async(client: redis.asyncio.Redis, reply: Any, queued: Queued) -> Recorded:
    """`finish` through an asyncio client."""
    return _recorded(await RECORD.finish_async(client, reply, *queued))


def _recorded(reply: Any) -> Recorded:
    if isinstance(reply, Exception):
        raise reply
    log_id, start, end = reply
    return Recorded(log_id, float(start), float(end))
