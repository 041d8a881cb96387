"""Choosing the pod for a request: the routing policies and the explanation of their choice.

- `ttft` (the default): the lowest estimated time to first token plus a work penalty,

      cost = predicted_wait + S_est + (kappa + queued) * (S_est - min over candidates of S_est)

  with S_est from `scoring.ttft`. The penalty charges the extra prefill a placement adds over
  the cheapest one to the requests it delays: without it the router leaves a warm pod for a
  cold one as soon as the warm one has any queue and then recomputes the prefix there
  (over-spreading). Two kinds of request wait behind the extra work. `queued`, the requests
  waiting on the pod now (`PodLoad.queued`): by Little's law as many arrive behind this one
  while it waits and prefills as wait there now, and each of them starts that much later.
  `kappa`, a parameter: the later requests of its prefix, which the move splits across two
  pods (bench/routing_quality.py found 1.5 best at low load, where no queue forms). With
  kappa alone the penalty stayed flat as queues grew: under sustained load every pod has a
  queue, moving looked cheap, the recomputed prefixes added work, the queues grew and moving
  looked cheaper still (issue 33: the hit rate fell from 75% to 50%). What spread them after
  that was the wait: the delivered wait factor (`scoring.route_state.corrected_wait_log`)
  swung between its bounds once queues were long, pricing warm pods seconds busier than they
  were, until its step was taken against the factor of now. Rendezvous hashing breaks only
  exact ties.
- `kthena`: the highest kthena score, as kthena's kvcache-aware plugin alone picks
  (`scoring.choice.choose`).

A pod's match is its own consecutive run of the request's blocks from the index walk, extended
by speculative blocks: blocks of requests kvadmin has just routed to the pod whose BlockStored
has not arrived yet. Without them a burst of same-prefix requests scatters, every one of them
seeing the prefix nowhere. A speculative block is priced as GPU-resident (the routed request
computes or reloads it into GPU memory).

Exact ties go to the tied pod with the least recent work: what kvadmin routed to it lately
(`RouteRequest.recent_work`, its requests in flight times their mean predicted prefill). A tie
is a request no pod holds more of than the others (a new conversation, a cold prompt, a prefix
past a preamble every pod holds) on pods with the same queue, and where it lands is where its
next turns will go: rendezvous hashing alone places new prefixes evenly by count, not by work,
so on a fleet of a dozen prefix groups a pod could end up with four of them and another with
none (bench/routing_quality.py, the demo workload: the busiest pod's prefill time went from
1.69x to 1.26x the mean at 30% load, p90 TTFT unchanged). Pods still tied then are broken by
rendezvous hashing of the request's first block that not every candidate holds (the first
block past the longest match of the tied pods; the first block when nothing matched). With the
first block as the key, a chat preamble every pod holds would tie every request on one key and
send all of them to one pod; past it, requests of one conversation keep one pod and distinct
conversations spread.
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Final, Literal

import msgspec

from scoring.choice import choose, tie_break
from scoring.score import MediaRun
from scoring.ttft import DEFAULT_PARAMETERS, PrefillEstimate, TtftParameters, estimate_prefill
from scoring.weights import TierWeights

Policy = Literal["ttft", "kthena"]
DEFAULT_POLICY: Final[Policy] = "ttft"
SPECULATIVE_MEDIUM: Final = "GPU"


class PodLoad(msgspec.Struct, frozen=True):
    """What is known of a pod's load. `stale`: the signal is older than it should be, or the
    pod's load is unknown; the pod is still priced with it, and the choice says so."""

    wait_s: float = 0.0
    """Predicted wait before the request's prefill starts (the pod's virtual queue)."""
    running: int = 0
    """Requests the pod is running (decoding), which slow its prefill."""
    stale: bool = False
    queued: float = 0.0
    """Requests waiting on the pod before this one (the engine's count, or the wait in mean
    prefills): those the extra work of a placement there delays (the module docstring)."""
    prefill_factor: float = 1.0
    """What the pod's prefills delivered over what they were predicted (scoring.route_state):
    its S_est is multiplied by it."""
    prefill_offset: float = 0.0
    """Seconds the pod's delivered correction adds to its S_est (the same fit's offset)."""


UNKNOWN_LOAD: Final = PodLoad(stale=True)


class CandidateCost(msgspec.Struct, frozen=True):
    """One candidate's estimate, in seconds, and what it rests on.

    A frozen msgspec Struct rather than a frozen dataclass, as `PodLoad`: every decision builds
    one per candidate (a frozen dataclass' __init__ took 2.2 us of its 14 fields, 70 us of a
    32-pod decision)."""

    pod: str
    matched_blocks: int
    speculative_blocks: int
    """Of `matched_blocks`, those only kvadmin's own recent routing says the pod holds."""
    cached_tokens: int
    uncached_tokens: int
    wait_s: float
    prefill_s: float
    """S_est, reload included."""
    reload_s: float
    """The part of `prefill_s` spent reloading lower-tier hits."""
    work_penalty_s: float
    cost_s: float
    load_stale: bool
    score: int
    """The kthena score (compatibility.md 2.4), 0 for a pod without the first block."""
    recent_work_s: float = 0.0
    """What kvadmin routed to the pod lately, in predicted prefill seconds: breaks ties."""
    runs: tuple[MediaRun, ...] = ()
    """The media of the blocks the pod was priced as holding, in block order (speculative
    blocks as GPU: `matched_runs`), kept so that a decision's estimates need not compute them
    again. Not compared: runs split differently ([GPU 1, GPU 1] or [GPU 2]) price the same."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not CandidateCost:
            return NotImplemented
        return self._priced() == other._priced()

    def __hash__(self) -> int:
        return hash(self._priced())

    def _priced(self) -> tuple[Any, ...]:
        """Every field but `runs` (the last)."""
        return msgspec.structs.astuple(self)[:-1]


@dataclass(frozen=True, slots=True)
class PolicyChoice:
    """The chosen pod, why, and every candidate's estimate, cheapest first (then pod id)."""

    policy: Policy
    chosen: str | None
    tie_broken: bool
    reason: str
    candidates: tuple[CandidateCost, ...]

    @property
    def stale_pods(self) -> tuple[str, ...]:
        return tuple(sorted(c.pod for c in self.candidates if c.load_stale))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "chosen": self.chosen,
            "tie_broken": self.tie_broken,
            "reason": self.reason,
            "stale_pods": list(self.stale_pods),
            "candidates": [msgspec.structs.asdict(c) for c in self.candidates],
        }


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """One request as the policy sees it. `runs`: per pod, the media of its matched blocks in
    block order (`PrefixWalk.runs`); `speculative`: per pod, the request's block hashes kvadmin
    recently routed there."""

    model: str
    blocks: Sequence[int]
    prompt_tokens: int
    block_size: int
    candidates: Sequence[str]
    runs: Mapping[str, tuple[MediaRun, ...]]
    scores: Mapping[str, int]
    speculative: Mapping[str, Set[int]]
    loads: Mapping[str, PodLoad]
    recent_work: Mapping[str, float] = field(default_factory=dict)
    """Per pod, the predicted prefill seconds of the requests kvadmin routed there that are
    still in flight (`scoring.route_state`); absent pods count 0."""


def matched_runs(
    runs: tuple[MediaRun, ...], blocks: Sequence[int], speculative: Set[int]
) -> tuple[tuple[MediaRun, ...], int]:
    """The pod's match: its index run with speculative blocks as GPU, extended past the run's
    end while the next block is speculative. Returns the runs and how many blocks only the
    speculative entries vouch for."""
    if not speculative:
        return runs, 0  # the walk's runs are merged already
    # Which blocks are speculative, in C; a run is split only where it holds any outside GPU
    # memory: every candidate holding speculative entries pays for this on every decision.
    flags = list(map(speculative.__contains__, blocks))
    merged: list[list[Any]] = []

    def add(medium: str | None, count: int) -> None:
        if merged and merged[-1][0] == medium:
            merged[-1][1] += count
        else:
            merged.append([medium, count])

    position, n_blocks = 0, len(blocks)
    for medium, count in runs:
        count = min(count, n_blocks - position)
        if count <= 0:
            continue
        run = flags[position : position + count]
        if medium == SPECULATIVE_MEDIUM or not any(run):
            add(medium, count)
        else:
            for held, part in groupby(run):
                add(SPECULATIVE_MEDIUM if held else medium, len(list(part)))
        position += count
    try:
        only_speculative = flags.index(False, position) - position
    except ValueError:
        only_speculative = n_blocks - position
    if only_speculative:
        add(SPECULATIVE_MEDIUM, only_speculative)
    return tuple((medium, count) for medium, count in merged), only_speculative


def choose_pod(
    request: RouteRequest,
    weights: TierWeights,
    policy: Policy = DEFAULT_POLICY,
    parameters: TtftParameters = DEFAULT_PARAMETERS,
) -> PolicyChoice:
    """Price every candidate (see the module docstring) and pick one under `policy`."""
    chooser = REGISTRY.get(policy)
    if chooser is None:
        raise ValueError(f"unknown policy {policy!r}; expected one of {', '.join(REGISTRY)}")
    estimates = []
    # Candidates holding the same runs with as many running requests price the same (most of a
    # fleet holds nothing of a request, or only the preamble every pod holds): estimated once.
    prefills: dict[tuple[str | None, tuple[MediaRun, ...], int], tuple[PrefillEstimate, int]] = {}
    runs_of, speculative_of, loads = request.runs.get, request.speculative.get, request.loads
    for pod in dict.fromkeys(request.candidates):
        runs, speculative_blocks = runs_of(pod, ()), 0
        if speculative := speculative_of(pod):
            runs, speculative_blocks = matched_runs(runs, request.blocks, speculative)
        load = loads.get(pod, UNKNOWN_LOAD)
        # Pods fitted on their own are priced apart; the others share one estimate per runs.
        key = (pod if parameters.fitted_alone(pod) else None, runs, load.running)
        estimated = prefills.get(key)
        if estimated is None:
            prefill = estimate_prefill(
                request.model,
                request.prompt_tokens,
                runs,
                request.block_size,
                load.running,
                weights,
                parameters,
                pod,  # its own calibrated T0 and speed, when it has them
            )
            estimated = prefills[key] = (prefill, sum(count for _medium, count in runs))
        prefill, matched = estimated
        prefill = prefill.scaled(load.prefill_factor, load.prefill_offset)
        estimates.append((pod, matched, speculative_blocks, prefill, load, runs))
    if not estimates:
        return PolicyChoice(chooser.name, None, False, "no candidate pod", ())
    cheapest = min(prefill.seconds for _p, _m, _s, prefill, _l, _r in estimates)
    kappa, scores, recent_work = parameters.kappa, request.scores, request.recent_work
    costs = []
    for pod, matched, speculative_blocks, prefill, load, runs in estimates:
        penalty = (kappa + max(load.queued, 0.0)) * (prefill.seconds - cheapest)
        wait = max(load.wait_s, 0.0)
        costs.append(
            CandidateCost(
                pod=pod,
                matched_blocks=matched,
                speculative_blocks=speculative_blocks,
                cached_tokens=prefill.cached_tokens,
                uncached_tokens=prefill.uncached_tokens,
                wait_s=wait,
                prefill_s=prefill.seconds,
                reload_s=prefill.reload_seconds,
                work_penalty_s=penalty,
                cost_s=wait + prefill.seconds + penalty,
                load_stale=load.stale,
                score=scores.get(pod, 0),
                recent_work_s=max(recent_work.get(pod, 0.0), 0.0),
                runs=runs,
            )
        )
    costs.sort(key=lambda c: (c.cost_s, c.recent_work_s, c.pod))
    return chooser.choose(request, tuple(costs))


class RoutingPolicy(ABC):
    """A way of choosing among the priced candidates: a new policy is one subclass and one
    line of `REGISTRY`."""

    name: Policy
    description: str
    """What the policy picks, for the API's description of `policy`."""

    @abstractmethod
    def choose(self, request: RouteRequest, ranked: tuple[CandidateCost, ...]) -> PolicyChoice:
        """The choice among `ranked`, every candidate priced, cheapest first (then pod id)."""


class Ttft(RoutingPolicy):
    name = "ttft"
    description = (
        "the lowest estimated time to first token (predicted wait + prefill estimate + work "
        "penalty)"
    )

    def choose(self, request: RouteRequest, ranked: tuple[CandidateCost, ...]) -> PolicyChoice:
        tied_pods = [c for c in ranked if c.cost_s == ranked[0].cost_s]
        if len(tied_pods) == 1:
            return PolicyChoice(self.name, ranked[0].pod, False, _ttft_reason(ranked), ranked)
        least_work = [c for c in tied_pods if c.recent_work_s == ranked[0].recent_work_s]
        if len(least_work) == 1:
            runner = tied_pods[1]
            reason = (
                f"{len(tied_pods)} pods tie at an estimated {_ms(ranked[0].cost_s)}; it has the "
                f"least recent work ({_ms(ranked[0].recent_work_s)}, {runner.pod} "
                f"{_ms(runner.recent_work_s)})"
            )
            return PolicyChoice(self.name, ranked[0].pod, False, reason, ranked)
        tied_pods = least_work
        depth = max(c.matched_blocks for c in tied_pods)
        key = request.blocks[min(depth, len(request.blocks) - 1)] if request.blocks else 0
        chosen = tie_break(key, (c.pod for c in tied_pods))
        reason = (
            f"{len(tied_pods)} pods tie at an estimated {_ms(ranked[0].cost_s)}; "
            "rendezvous hashing of the first block they do not all hold picked one"
        )
        return PolicyChoice(self.name, chosen, True, reason, ranked)


class Kthena(RoutingPolicy):
    name = "kthena"
    description = "the highest score, as kthena's plugin alone picks"

    def choose(self, request: RouteRequest, ranked: tuple[CandidateCost, ...]) -> PolicyChoice:
        first = request.blocks[0] if request.blocks else 0
        chosen, tied = choose(request.scores, request.candidates, first)
        return PolicyChoice(self.name, chosen, tied, _kthena_reason(ranked, chosen, tied), ranked)


REGISTRY: Final[Mapping[str, RoutingPolicy]] = {
    policy.name: policy for policy in (Ttft(), Kthena())
}
POLICIES: Final[tuple[Policy, ...]] = tuple(REGISTRY)  # type: ignore[assignment]


def policy_description() -> str:
    """The API's description of `policy`, from the registry."""
    choices = "; ".join(f"`{name}`, {policy.description}" for name, policy in REGISTRY.items())
    return (
        f"How `chosen` is picked: {choices}. Default: the KVADMIN_ROUTING_POLICY knob "
        f"(`{DEFAULT_POLICY}`). Scores are the same under all."
    )


def _ttft_reason(ranked: tuple[CandidateCost, ...]) -> str:
    best = ranked[0]
    text = f"lowest estimated time to first token: {_ms(best.cost_s)}"
    if len(ranked) == 1:
        return text + " (the only candidate)"
    runner = ranked[1]
    parts = [
        (runner.wait_s - best.wait_s, "less wait"),
        (runner.prefill_s - best.prefill_s, "less prefill"),
        (runner.work_penalty_s - best.work_penalty_s, "less extra work"),
    ]
    gains = ", ".join(f"{_ms(gain)} {what}" for gain, what in parts if gain > 0)
    return f"{text}, {_ms(runner.cost_s - best.cost_s)} ahead of {runner.pod} ({gains})"


def _kthena_reason(ranked: tuple[CandidateCost, ...], chosen: str | None, tied: bool) -> str:
    score = next((c.score for c in ranked if c.pod == chosen), 0)
    if tied:
        return f"highest kthena score ({score}), tied; rendezvous hashing of the first block"
    return f"highest kthena score ({score})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"
