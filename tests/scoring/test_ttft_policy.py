"""The `ttft` policy: the lowest estimated time to first token plus the work penalty wins;
rendezvous hashing breaks only exact ties; `kthena` keeps kthena's pick."""

from collections import Counter
from dataclasses import replace

import pytest

from scoring.choice import choose, tie_break
from scoring.policy import PodLoad, RouteRequest, choose_pod, matched_runs
from scoring.ttft import TtftParameters
from scoring.weights import TierWeights

WEIGHTS = TierWeights.from_config({"disk": 0.5})
PARAMETERS = TtftParameters(first_token_s=0.01, default_prefill_tokens_per_s=10_000, kappa=1.0)
PODS = ["a", "b", "c", "d"]
BLOCKS = list(range(100, 164))
"""64 blocks of 16 tokens: 1024 prompt tokens."""


def request(runs=None, loads=None, speculative=None, scores=None, blocks=BLOCKS, pods=PODS):
    idle = {pod: PodLoad() for pod in pods}
    return RouteRequest(
        model="m",
        blocks=blocks,
        prompt_tokens=16 * len(blocks),
        block_size=16,
        candidates=pods,
        runs=runs or {},
        scores=scores or {},
        speculative=speculative or {},
        loads=idle | (loads or {}),
    )


def test_the_pod_holding_the_prefix_wins_when_idle() -> None:
    choice = choose_pod(request(runs={"c": (("GPU", 48),)}), WEIGHTS, "ttft", PARAMETERS)
    assert (choice.chosen, choice.tie_broken) == ("c", False)
    best = choice.candidates[0]
    assert (best.pod, best.cached_tokens, best.uncached_tokens) == ("c", 768, 256)
    assert best.prefill_s == pytest.approx(0.01 + 256 / 10_000)
    assert best.work_penalty_s == 0.0
    assert choice.candidates[1].work_penalty_s == pytest.approx(768 / 10_000)
    assert "ahead of" in choice.reason


def test_a_long_queue_on_the_warm_pod_sends_the_request_elsewhere() -> None:
    runs = {"c": (("GPU", 48),)}
    loads = {"c": PodLoad(wait_s=0.5)}
    choice = choose_pod(request(runs, loads, pods=["a", "c"]), WEIGHTS, "ttft", PARAMETERS)
    assert (choice.chosen, choice.tie_broken) == ("a", False)
    assert choice.reason.endswith("ahead of c (500.0 ms less wait)")


def test_the_work_penalty_keeps_affinity_under_a_short_queue() -> None:
    """c saves 76.8 ms of prefill and has 100 ms of queue: greedy TTFT leaves it, the penalty
    for recomputing the prefix elsewhere keeps it."""
    runs, loads = {"c": (("GPU", 48),)}, {"c": PodLoad(wait_s=0.1)}
    assert choose_pod(request(runs, loads), WEIGHTS, "ttft", PARAMETERS).chosen == "c"
    greedy = TtftParameters(first_token_s=0.01, kappa=0.0)
    assert choose_pod(request(runs, loads), WEIGHTS, "ttft", greedy).chosen != "c"


def test_exact_ties_are_broken_by_rendezvous_hashing_of_the_first_block() -> None:
    choice = choose_pod(request(), WEIGHTS, "ttft", PARAMETERS)
    assert choice.tie_broken
    assert choice.chosen == tie_break(BLOCKS[0], PODS)
    reordered = choose_pod(request(pods=list(reversed(PODS))), WEIGHTS, "ttft", PARAMETERS)
    assert reordered.chosen == choice.chosen
    assert "tie" in choice.reason


def test_a_preamble_every_pod_holds_does_not_send_every_request_to_one_pod() -> None:
    preamble = {pod: (("GPU", 2),) for pod in PODS}
    picks = Counter(
        choose_pod(request(preamble, blocks=[1, 2, 1000 + n, 5000 + n]), WEIGHTS).chosen
        for n in range(800)
    )
    assert set(picks) == set(PODS)
    assert max(picks.values()) < 1.3 * 800 / len(PODS)


def test_requests_past_the_same_preamble_with_the_same_next_block_keep_one_pod() -> None:
    preamble = {pod: (("GPU", 2),) for pod in PODS}
    picks = {choose_pod(request(preamble, blocks=[1, 2, 77, 5000 + n]), WEIGHTS).chosen
             for n in range(50)}  # fmt: skip
    assert len(picks) == 1


def test_a_lower_tier_hit_costs_its_reload() -> None:
    runs = {"a": (("CPU", 32),), "b": (("GPU", 32),), "c": (("DISK", 32),)}
    choice = choose_pod(request(runs), WEIGHTS, "ttft", PARAMETERS)
    by_pod = {c.pod: c for c in choice.candidates}
    assert choice.chosen == "b"
    assert by_pod["b"].reload_s == 0.0
    assert by_pod["a"].reload_s == pytest.approx(0.2 * 512 / 10_000)
    assert by_pod["c"].reload_s == pytest.approx(0.5 * 512 / 10_000)
    assert by_pod["a"].prefill_s < by_pod["c"].prefill_s < by_pod["d"].prefill_s


def test_a_tier_weighing_one_reloads_for_free_and_ties_with_gpu() -> None:
    runs = {"a": (("CPU", 32),), "b": (("GPU", 32),)}
    flat = TierWeights.from_config({"cpu": 1.0})
    choice = choose_pod(request(runs), flat, "ttft", PARAMETERS)
    assert choice.tie_broken and choice.chosen in {"a", "b"}


def test_speculative_blocks_extend_the_match_a_burst_would_otherwise_scatter() -> None:
    speculative = {"d": set(BLOCKS[:40])}
    choice = choose_pod(request(speculative=speculative), WEIGHTS, "ttft", PARAMETERS)
    assert choice.chosen == "d"
    best = choice.candidates[0]
    assert (best.matched_blocks, best.speculative_blocks) == (40, 40)


def test_speculative_blocks_continue_the_index_run_and_count_as_gpu() -> None:
    runs, speculative = matched_runs((("CPU", 3),), [1, 2, 3, 4, 5, 6], {2, 4, 5})
    assert runs == (("CPU", 1), ("GPU", 1), ("CPU", 1), ("GPU", 2))
    assert speculative == 2


def test_a_speculative_block_after_a_gap_does_not_count() -> None:
    assert matched_runs((), [1, 2, 3], {2, 3}) == ((), 0)


def test_stale_and_unknown_load_is_flagged_per_pod() -> None:
    """a's load is stale, c's and d's unknown: all are still priced, and flagged."""
    loads = {"a": PodLoad(wait_s=0.2, stale=True), "b": PodLoad()}
    choice = choose_pod(replace(request(), loads=loads), WEIGHTS, "ttft", PARAMETERS)
    assert choice.stale_pods == ("a", "c", "d")
    assert choice.to_dict()["stale_pods"] == ["a", "c", "d"]
    assert {c.pod: c.wait_s for c in choice.candidates}["a"] == 0.2


def test_running_requests_slow_the_prefill() -> None:
    busy = TtftParameters(first_token_s=0.01, decode_slowdown=0.1)
    choice = choose_pod(request(loads={"a": PodLoad(running=10)}), WEIGHTS, "ttft", busy)
    by_pod = {c.pod: c for c in choice.candidates}
    assert by_pod["a"].prefill_s == pytest.approx(0.01 + 2 * 1024 / 10_000)
    assert choice.chosen != "a"


def test_a_hit_never_covers_the_last_prompt_token() -> None:
    choice = choose_pod(request(runs={"a": (("GPU", 64),)}), WEIGHTS, "ttft", PARAMETERS)
    assert (choice.candidates[0].cached_tokens, choice.candidates[0].uncached_tokens) == (1023, 1)


def test_the_kthena_policy_picks_the_highest_score_whatever_the_load() -> None:
    runs, scores = {"c": (("GPU", 48),)}, {"c": 75}
    loads = {"c": PodLoad(wait_s=5.0)}
    choice = choose_pod(request(runs, loads, scores=scores), WEIGHTS, "kthena", PARAMETERS)
    assert (choice.policy, choice.chosen) == ("kthena", "c")
    assert choice.chosen == choose(scores, PODS, BLOCKS[0])[0]
    assert "kthena score (75)" in choice.reason


def test_the_explanation_serializes_every_candidate() -> None:
    document = choose_pod(request(runs={"c": (("GPU", 48),)}), WEIGHTS).to_dict()
    assert document["policy"] == "ttft" and document["chosen"] == "c"
    assert [c["pod"] for c in document["candidates"]][0] == "c"
    assert set(document["candidates"][0]) >= {
        "wait_s", "prefill_s", "reload_s", "work_penalty_s", "cost_s", "load_stale",
    }  # fmt: skip


def test_no_candidate_chooses_nothing() -> None:
    choice = choose_pod(request(pods=[]), WEIGHTS)
    assert (choice.chosen, choice.candidates) == (None, ())


def test_an_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        choose_pod(request(), WEIGHTS, "fastest")  # type: ignore[arg-type]


def test_a_warm_pod_is_not_abandoned_when_the_move_adds_more_work_than_it_saves() -> None:
    """Every pod has a queue (sustained load). c holds the prefix and waits 250 ms; a waits
    100 ms behind 4 requests. Moving recomputes 768 tokens (76.8 ms) on a, which delays those
    4 requests too: c stays. With kappa alone (the old penalty) a looked 73 ms cheaper."""
    runs = {"c": (("GPU", 48),)}
    loads = {"c": PodLoad(wait_s=0.25, queued=4), "a": PodLoad(wait_s=0.1, queued=4)}
    choice = choose_pod(request(runs, loads, pods=["a", "c"]), WEIGHTS, "ttft", PARAMETERS)
    assert choice.chosen == "c"
    moved = next(c for c in choice.candidates if c.pod == "a")
    assert moved.work_penalty_s == pytest.approx((1.0 + 4) * 768 / 10_000)


def test_an_idle_pod_still_takes_the_request_off_a_long_queue() -> None:
    """No request waits on a: the recomputed prefix delays nobody, and c's second wins."""
    runs = {"c": (("GPU", 48),)}
    loads = {"c": PodLoad(wait_s=1.0, queued=12), "a": PodLoad()}
    choice = choose_pod(request(runs, loads, pods=["a", "c"]), WEIGHTS, "ttft", PARAMETERS)
    assert choice.chosen == "a"
