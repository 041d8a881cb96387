"""A small recorded decision set whose replay under `DRAFT` is worked out by hand.

Scores are kthena's: int(weighted sum / blocks * 100), defaults gpu 1, cpu 0.8, fallback 1.

| decision | pods: runs (recorded score)         | chosen | under DRAFT (cpu 0.5, disk 0.2) |
|----------|-------------------------------------|--------|---------------------------------|
| A, n=4   | p1: CPU x4 (80), p2: GPU x3 (75)    | p1     | p1 50, p2 75 -> p2              |
| B, n=4   | p1: GPU x4 (100), p2: CPU x2 (40)   | p1     | p1 100, p2 25 -> p1             |
| C, n=2   | p2: DISK x2 (100), p3: GPU x1 (50)  | p2     | p2 20, p3 50 -> p3              |

So 2 of 3 change; p1 goes from 2 decisions to 1, p3 from 0 to 1, p2 stays at 1; the six
score changes are -30, 0, 0, -15, -80, 0.
"""

import redis

from kvadmin.routing.decisions import Decision, Dropped, PodExplanation, append
from kvadmin.weights.config import WeightConfig
from tests.index import MODEL

DRAFT_CONFIG = WeightConfig.validated({"cpu": 0.5, "disk": 0.2})
DRAFT = DRAFT_CONFIG.tier_weights()
RECORDED_VERSION = 4


def _decision(
    name: str, first_block: int, n_blocks: int, chosen: str, scores: list[tuple]
) -> Decision:
    pods = [pod for pod, _, _ in scores]
    return Decision(
        decision_id=name,
        ts=1_800_000_000.0,
        request_id=name,
        model=MODEL,
        input="token_ids",
        tokens=n_blocks * 16,
        blocks=n_blocks,
        first_block=first_block,
        longest_match=max(sum(count for _, count in runs) for _, _, runs in scores),
        candidates=pods,
        chosen=chosen,
        tie_break=False,
        scores=[
            PodExplanation(
                pod=pod,
                score=score,
                matched_blocks=sum(count for _, count in runs),
                weighted_sum=0.0,
                media={},
                runs=runs,
            )
            for pod, score, runs in scores
        ],
        dropped=Dropped(non_candidates=[], stale=[]),
        weights_version=RECORDED_VERSION,
        weights={},
        timings_ms={},
    )


DECISIONS = [
    _decision("A", 11, 4, "p1", [("p1", 80, [("CPU", 4)]), ("p2", 75, [("GPU", 3)])]),
    _decision("B", 22, 4, "p1", [("p1", 100, [("GPU", 4)]), ("p2", 40, [("CPU", 2)])]),
    _decision("C", 33, 2, "p2", [("p2", 100, [("DISK", 2)]), ("p3", 50, [("GPU", 1)])]),
]


def record(client: redis.Redis) -> None:
    for decision in DECISIONS:
        append(decision, client)
