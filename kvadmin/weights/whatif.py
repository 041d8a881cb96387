"""What-if: the latest recorded decisions replayed under draft weights, summarized.

A decision records, per scored pod, the media of its matched blocks in order, so it can be
rescored under any weights without reading the index again (`routing.decisions.rescore`).
The comparison is with what was actually chosen: "how many requests would have gone
elsewhere". The same decisions also replay under both shipped conventions, kthena's defaults
(unconfigured media at the 1.0 fallback) and kvadmin's (every medium weighed in physical
order), so an operator sees what adopting either would do. Nothing is written.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvadmin.routing import decisions
from kvadmin.routing.decisions import Decision
from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS, WeightConfig
from scoring.weights import TierWeights

MAX_DECISIONS = 10_000

CONVENTIONS: tuple[tuple[str, WeightConfig], ...] = (
    ("kthena defaults (1.0 fallback)", KTHENA_DEFAULTS),
    ("kvadmin defaults", KVADMIN_DEFAULTS),
)
"""The shipped conventions the what-if shows next to the draft, by label."""

_BUCKETS: tuple[tuple[str, int, int], ...] = (
    ("−50 or less", -100, -50),
    ("−49 to −20", -49, -20),
    ("−19 to −5", -19, -5),
    ("−4 to −1", -4, -1),
    ("unchanged", 0, 0),
    ("+1 to +4", 1, 4),
    ("+5 to +19", 5, 19),
    ("+20 to +49", 20, 49),
    ("+50 or more", 50, 100),
)
_BAR_EM = 20


@dataclass(frozen=True, slots=True)
class Replay:
    """One decision: as recorded, and as the draft would have made it."""

    chosen_before: str | None
    chosen_after: str | None
    scores_before: Mapping[str, int]
    scores_after: Mapping[str, int]
    weights_version: int
    """The version the decision was made with."""


@dataclass(frozen=True, slots=True)
class PodTraffic:
    pod: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True, slots=True)
class Bucket:
    label: str
    count: int
    width: float
    """Bar length in em, the largest bucket at `_BAR_EM`."""


@dataclass(frozen=True, slots=True)
class WhatIf:
    replayed: int
    changed: int
    traffic: list[PodTraffic]
    """Pods whose number of chosen decisions changes, biggest gain first."""
    score_changes: list[Bucket]
    """How each scored pod's score moved, over every replayed decision."""
    versions: tuple[int, ...] = ()
    """The weights versions the replayed decisions were made with."""

    @property
    def changed_percent(self) -> float:
        return 100.0 * self.changed / self.replayed if self.replayed else 0.0


def summarize(replays: Iterable[Replay]) -> WhatIf:
    replayed = changed = 0
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    deltas: Counter[int] = Counter()
    versions: set[int] = set()
    for replay in replays:
        replayed += 1
        versions.add(replay.weights_version)
        changed += replay.chosen_before != replay.chosen_after
        if replay.chosen_before is not None:
            before[replay.chosen_before] += 1
        if replay.chosen_after is not None:
            after[replay.chosen_after] += 1
        for pod in replay.scores_before.keys() | replay.scores_after.keys():
            deltas[replay.scores_after.get(pod, 0) - replay.scores_before.get(pod, 0)] += 1
    traffic = sorted(
        (
            PodTraffic(pod, before[pod], after[pod])
            for pod in before.keys() | after.keys()
            if before[pod] != after[pod]
        ),
        key=lambda pod: (-pod.delta, pod.pod),
    )
    return WhatIf(replayed, changed, traffic, _buckets(deltas), tuple(sorted(versions)))


def replay(decision: Decision, weights: TierWeights) -> Replay:
    chosen, pods = decisions.rescore(decision, weights)
    return Replay(
        chosen_before=decision.chosen,
        chosen_after=chosen,
        scores_before={scored.pod: scored.score for scored in decision.scores},
        scores_after={scored.pod: scored.score for scored in pods},
        weights_version=decision.weights_version,
    )


def _buckets(deltas: Counter[int]) -> list[Bucket]:
    counts = [
        (label, sum(n for delta, n in deltas.items() if low <= delta <= high))
        for label, low, high in _BUCKETS
    ]
    largest = max((count for _, count in counts), default=0) or 1
    return [Bucket(label, count, round(_BAR_EM * count / largest, 2)) for label, count in counts]


def preview(weights: TierWeights, limit: int) -> WhatIf:
    """Replay the latest `limit` recorded decisions under `weights`."""
    return summarize(replay(decision, weights) for decision in decisions.recent(limit))


@dataclass(frozen=True, slots=True)
class Convention:
    """The replayed decisions under one shipped convention."""

    label: str
    weights: TierWeights
    result: WhatIf


def compare(draft: TierWeights, limit: int) -> tuple[WhatIf, list[Convention]]:
    """`preview` of the draft, and the same decisions (read once) under each convention."""
    recent = decisions.recent(limit)
    conventions = []
    for label, config in CONVENTIONS:
        weights = config.tier_weights()
        conventions.append(
            Convention(label, weights, summarize(replay(d, weights) for d in recent))
        )
    return summarize(replay(decision, draft) for decision in recent), conventions
