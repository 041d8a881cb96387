"""What-if: the latest recorded decisions replayed under a draft version, summarized.

A decision records, per scored pod, the media of its matched blocks in order, so it can be
rescored under any weights without reading the index again (`routing.decisions.rescore`). A
decision the `ttft` policy made also records, per priced candidate, the wait, the running
requests and the blocks it was priced as holding, so it is priced again under the draft's
weights AND TTFT parameters with the policy itself (`scoring.policy.choose_pod`). Two things
are kept as recorded: the wait (the queue of predicted prefills as it stood), and the candidates
(the ones the decision kept, ROUTING_ESTIMATES_MAX of them and the chosen pod). When the replay
ties among pods that include the recorded choice, the recorded tie-break stands: it hashed a
block the decision does not keep.

The comparison is with what was actually chosen: "how many requests would have gone
elsewhere". The same decisions also replay under both shipped weight conventions, kthena's
defaults (unconfigured media at the 1.0 fallback) and kvadmin's (every medium weighed in
physical order), with the draft's parameters, so an operator sees what adopting either would
do. Nothing is written.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvadmin.conf import knob
from kvadmin.routing import decisions
from kvadmin.routing.decisions import Decision
from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS, WeightConfig
from scoring.policy import PodLoad, RouteRequest, choose_pod
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
    priced: bool = False
    """Priced again by the `ttft` policy (else rescored as kthena's plugin scores)."""


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
    priced: int = 0
    """How many of them the `ttft` policy priced again under the draft's parameters."""

    @property
    def changed_percent(self) -> float:
        return 100.0 * self.changed / self.replayed if self.replayed else 0.0


def summarize(replays: Iterable[Replay]) -> WhatIf:
    replayed = changed = priced = 0
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    deltas: Counter[int] = Counter()
    versions: set[int] = set()
    for replay in replays:
        replayed += 1
        versions.add(replay.weights_version)
        changed += replay.chosen_before != replay.chosen_after
        priced += replay.priced
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
    return WhatIf(replayed, changed, traffic, _buckets(deltas), tuple(sorted(versions)), priced)


def replay(decision: Decision, config: WeightConfig) -> Replay:
    weights = config.tier_weights()
    chosen, pods = decisions.rescore(decision, weights)
    scores_after = {scored.pod: scored.score for scored in pods}
    priced = decision.policy == "ttft" and bool(decision.estimates)
    if priced:
        chosen = _ttft_choice(decision, config, scores_after)
    return Replay(
        chosen_before=decision.chosen,
        chosen_after=chosen,
        scores_before={scored.pod: scored.score for scored in decision.scores},
        scores_after=scores_after,
        weights_version=decision.weights_version,
        priced=priced,
    )


def _ttft_choice(decision: Decision, config: WeightConfig, scores: dict[str, int]) -> str | None:
    """The `ttft` policy's choice among the recorded candidates under `config`."""
    index_runs = {scored.pod: tuple(scored.runs) for scored in decision.scores}
    runs = {
        # An entry recorded before estimates kept their runs: the index's runs stand in.
        e.pod: tuple(e.runs) if e.runs or not e.matched_blocks else index_runs.get(e.pod, ())
        for e in decision.estimates
    }
    request = RouteRequest(
        model=decision.model,
        blocks=(decision.first_block,),
        prompt_tokens=decision.tokens,
        block_size=knob("BLOCK_SIZE"),
        candidates=list(runs),
        runs=runs,
        scores=scores,
        speculative={},
        loads={
            e.pod: PodLoad(e.wait_s, e.running, e.load_stale, e.queued) for e in decision.estimates
        },
    )
    choice = choose_pod(request, config.tier_weights(), "ttft", config.ttft)
    if choice.tie_broken:
        lowest = choice.candidates[0].cost_s
        tied = {c.pod for c in choice.candidates if c.cost_s == lowest}
        if decision.chosen in tied:
            return decision.chosen
    return choice.chosen


def _buckets(deltas: Counter[int]) -> list[Bucket]:
    counts = [
        (label, sum(n for delta, n in deltas.items() if low <= delta <= high))
        for label, low, high in _BUCKETS
    ]
    largest = max((count for _, count in counts), default=0) or 1
    return [Bucket(label, count, round(_BAR_EM * count / largest, 2)) for label, count in counts]


def preview(config: WeightConfig, limit: int) -> WhatIf:
    """Replay the latest `limit` recorded decisions under `config`."""
    return summarize(replay(decision, config) for decision in decisions.recent(limit))


@dataclass(frozen=True, slots=True)
class Convention:
    """The replayed decisions under one shipped weight convention."""

    label: str
    weights: TierWeights
    result: WhatIf


def compare(draft: WeightConfig, limit: int) -> tuple[WhatIf, list[Convention]]:
    """`preview` of the draft, and the same decisions (read once) under each weight
    convention with the draft's TTFT parameters."""
    recent = decisions.recent(limit)
    conventions = []
    for label, convention in CONVENTIONS:
        config = convention.with_ttft(draft.ttft)
        result = summarize(replay(d, config) for d in recent)
        conventions.append(Convention(label, config.tier_weights(), result))
    return summarize(replay(decision, draft) for decision in recent), conventions
