"""Prefix scoring exactly as kthena's router computes it (compatibility.md 2.4), with the
explanation kvadmin shows operators.

Scoring is split in two so that the index readers can share it:
1. the walk (`walk_prefix`, or the same walk done inside Redis by `index.IndexReader`) filters
   owners and follows the request's blocks while some pod still holds every block so far;
2. `score_walk` applies tier weights to what the walk found. It only ever sees the walk, so
   both readers give identical results as long as their walks agree.

"Dropped" pods are the ones the filters actually cost something: owners of the first block that
are not candidates, and candidates whose match was prevented (first block) or cut short (a later
block, while still matching) by ownership written at or before their last start. Owners of later
blocks that no longer match could not have scored anyway and are not reported, which is what lets
the Redis-side walk look only at pods still matching.
"""

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from scoring.values import BlockValue, is_stale, parse_value
from scoring.weights import TierWeights

OwnerValue = str | BlockValue
"""An owner's value: the raw Redis text ("ts" or "ts|MEDIUM") or an already parsed one."""

MediaRun = tuple[str | None, int]
"""A medium and how many consecutive matched blocks were held in it."""


Span = tuple[int, int]
"""Consecutive matched blocks: the 0-based position of the first and how many."""

HeldMedia = Mapping[str | None, tuple[Span, ...]]
"""Per medium (None: no medium), the spans of a pod's matched blocks that kvadmin's residency
says the pod holds in it."""


@dataclass(frozen=True, slots=True)
class PrefixWalk:
    """What the walk found, before weights: for each pod that holds the first block, the media
    of its matched blocks in block order, as runs; and who was dropped.

    Under the legacy value format (`values.ValueFormat.LEGACY`) the values name no medium:
    `held` then gives, per pod, the media its matched blocks are held in by kvadmin's residency,
    from which `score_walk` takes each block's best medium under the weights."""

    runs: Mapping[str, tuple[MediaRun, ...]]
    dropped_non_candidates: frozenset[str] = frozenset()
    dropped_stale: frozenset[str] = frozenset()
    held: Mapping[str, HeldMedia] | None = None


@dataclass(slots=True)
class PodScore:
    """One pod's score and why."""

    pod: str
    score: int
    matched_blocks: int
    weighted_sum: float
    media: Mapping[str | None, int]
    """Matched blocks per medium (None: no medium)."""
    media_runs: tuple[MediaRun, ...]
    """The media of the matched blocks in block order, as runs: (("GPU", 40), ("CPU", 8))."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; in `media` the key "" stands for no medium, as in "ts|"."""
        return {
            "pod": self.pod,
            "score": self.score,
            "matched_blocks": self.matched_blocks,
            "weighted_sum": self.weighted_sum,
            "media": {medium or "": count for medium, count in self.media.items()},
            "media_runs": [[medium, count] for medium, count in self.media_runs],
        }


@dataclass(slots=True)
class Timings:
    """Where the time of one `index.score_request` went, in milliseconds."""

    hash_ms: float
    read_ms: float
    score_ms: float

    @property
    def total_ms(self) -> float:
        return self.hash_ms + self.read_ms + self.score_ms

    def to_dict(self) -> dict[str, float]:
        return {
            "hash_ms": self.hash_ms,
            "read_ms": self.read_ms,
            "score_ms": self.score_ms,
            "total_ms": self.total_ms,
        }


@dataclass(slots=True)
class ScoreResult:
    """The scores of one request. `pods` holds only pods with the first block (compatibility.md 2.4
    step 5), best first (score descending, then pod id). Timings are not part of equality."""

    n_blocks: int
    longest_match: int
    pods: tuple[PodScore, ...]
    dropped_non_candidates: tuple[str, ...] = ()
    dropped_stale: tuple[str, ...] = ()
    timings: Timings | None = field(default=None, compare=False)

    @property
    def scores(self) -> dict[str, int]:
        """Pod -> score, what the router plugin returns."""
        return {pod.pod: pod.score for pod in self.pods}

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_blocks": self.n_blocks,
            "longest_match": self.longest_match,
            "pods": [pod.to_dict() for pod in self.pods],
            "dropped_non_candidates": list(self.dropped_non_candidates),
            "dropped_stale": list(self.dropped_stale),
            "timings": self.timings.to_dict() if self.timings else None,
        }


def score_pods(
    blocks: Sequence[int],
    owners: Mapping[int, Mapping[str, OwnerValue]],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    weights: TierWeights,
) -> ScoreResult:
    """Score pods for a request's block hashes.

    `owners` maps a block hash to its owners (pod -> value), as read from the block's key; a
    missing hash has no owners. `candidates` None means every pod is a candidate.
    `pod_started_at` holds the unix second of each pod's last (re)start, where known.
    """
    walk = walk_prefix(blocks, owners, candidates, pod_started_at)
    return score_walk(walk, len(blocks), weights)


def walk_prefix(
    blocks: Sequence[int],
    owners: Mapping[int, Mapping[str, OwnerValue]],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
) -> PrefixWalk:
    """compatibility.md 2.4 steps 1 and 2.

    1. The first block's owners minus non-candidates and stale owners are the active pods.
    2. For each further block, an active pod stays active if it holds the block and its value
       there is not stale; the walk stops at the first block that leaves no pod active.
    """
    if not blocks:
        return PrefixWalk({})
    non_candidates: set[str] = set()
    stale: set[str] = set()
    media: dict[str, list[str | None]] = {}
    for pod, raw in owners.get(blocks[0], {}).items():
        if candidates is not None and pod not in candidates:
            non_candidates.add(pod)
            continue
        value = _parsed(raw)
        if is_stale(value, pod_started_at.get(pod)):
            stale.add(pod)
        else:
            media[pod] = [value.medium]
    active = list(media)
    for block in blocks[1:]:
        if not active:
            break
        block_owners = owners.get(block, {})
        still_active = []
        for pod in active:
            raw = block_owners.get(pod)
            if raw is None:
                continue
            value = _parsed(raw)
            if is_stale(value, pod_started_at.get(pod)):
                stale.add(pod)
            else:
                media[pod].append(value.medium)
                still_active.append(pod)
        active = still_active
    runs = {pod: tuple((m, len(list(g))) for m, g in groupby(ms)) for pod, ms in media.items()}
    return PrefixWalk(runs, frozenset(non_candidates), frozenset(stale))


def score_walk(walk: PrefixWalk, n_blocks: int, weights: TierWeights) -> ScoreResult:
    """compatibility.md 2.4 steps 3 to 5 over what the walk found; `n_blocks` is the number of
    hashed blocks of the request (not max_blocks).

    A legacy walk (`PrefixWalk.held`) scores as kthena main does, every matched block 1
    (compatibility.md 2.7), and its pods' media runs come from the residency."""
    if walk.held is None:
        scored = (_pod_score(pod, runs, n_blocks, weights) for pod, runs in walk.runs.items())
    else:
        held = walk.held
        scored = (
            _legacy_pod_score(pod, runs, held.get(pod, {}), n_blocks, weights)
            for pod, runs in walk.runs.items()
        )
    pods = sorted(scored, key=lambda pod: (-pod.score, pod.pod))
    return ScoreResult(
        n_blocks=n_blocks,
        longest_match=max((scored.matched_blocks for scored in pods), default=0),
        pods=tuple(pods),
        dropped_non_candidates=tuple(sorted(walk.dropped_non_candidates)),
        dropped_stale=tuple(sorted(walk.dropped_stale)),
    )


def weighted_sum(runs: Sequence[MediaRun], weights: TierWeights) -> float:
    """compatibility.md 2.4 step 3: s = w(B0), then s += w(Bi) block by block. Float addition is not
    associative, so this order is part of the contract (k * w is not k additions of w).

    The shortcuts give the same double as the loop: starting from 0.0 instead of w(B0)
    (0.0 + w == w); adding a run of weight 1.0 at once to an integral sum (integers below
    2**53 are exact, so none of those additions rounds); skipping a run of weight 0.0.
    """
    total = 0.0
    for medium, count in runs:
        weight = weights.weight_for(medium)
        if weight == 1.0 and total.is_integer():
            total += count
        elif weight != 0.0:
            for _ in range(count):
                total += weight
    return total


def _pod_score(
    pod: str, runs: tuple[MediaRun, ...], n_blocks: int, weights: TierWeights
) -> PodScore:
    total = weighted_sum(runs, weights)
    media = _blocks_by_medium(runs)
    return PodScore(
        pod=pod,
        score=int((total / n_blocks) * 100),
        matched_blocks=sum(media.values()),
        weighted_sum=total,
        media=media,
        media_runs=runs,
    )


def residency_runs(held: HeldMedia, matched: int, weights: TierWeights) -> tuple[MediaRun, ...]:
    """The media runs of `matched` blocks whose media are `held`: each block in the best medium
    it is held in (`TierWeights.best_medium`, the order the writer names media by), None where
    the residency holds it in none."""
    per_block: list[list[str | None]] = [[] for _ in range(matched)]
    for medium, spans in held.items():
        for first, count in spans:
            for position in range(first, min(first + count, matched)):
                per_block[position].append(medium)
    best = (weights.best_medium(media) if media else None for media in per_block)
    return tuple((medium, len(list(group))) for medium, group in groupby(best))


def spans(positions: Iterable[int]) -> tuple[Span, ...]:
    """Ascending 0-based positions as spans of consecutive ones."""
    found: list[Span] = []
    for position in positions:
        if found and sum(found[-1]) == position:
            found[-1] = (found[-1][0], found[-1][1] + 1)
        else:
            found.append((position, 1))
    return tuple(found)


def _legacy_pod_score(
    pod: str, runs: tuple[MediaRun, ...], held: HeldMedia, n_blocks: int, weights: TierWeights
) -> PodScore:
    matched = sum(count for _medium, count in runs)
    media_runs = residency_runs(held, matched, weights)
    return PodScore(
        pod=pod,
        score=int((matched / n_blocks) * 100),
        matched_blocks=matched,
        weighted_sum=float(matched),
        media=_blocks_by_medium(media_runs),
        media_runs=media_runs,
    )


def _blocks_by_medium(runs: Sequence[MediaRun]) -> dict[str | None, int]:
    media: dict[str | None, int] = {}
    for medium, count in runs:
        media[medium] = media.get(medium, 0) + count
    return media


def _parsed(raw: OwnerValue) -> BlockValue:
    return raw if isinstance(raw, BlockValue) else parse_value(raw)
