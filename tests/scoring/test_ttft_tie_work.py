"""The `ttft` policy's exact ties go to the tied pod with the least recent work (what kvadmin
routed to it lately), then to rendezvous hashing; recent work never outweighs a cost."""

import pytest

from scoring.choice import tie_break
from scoring.policy import PodLoad, RouteRequest, choose_pod
from scoring.route_state import RawPodState, load_reading
from scoring.ttft import TtftParameters
from scoring.weights import TierWeights

WEIGHTS = TierWeights()
PARAMETERS = TtftParameters(first_token_s=0.01, default_prefill_tokens_per_s=10_000, kappa=1.0)
PODS = ["a", "b", "c", "d"]
BLOCKS = list(range(100, 164))


def request(recent: dict[str, float], runs=None) -> RouteRequest:
    return RouteRequest(
        model="m",
        blocks=BLOCKS,
        prompt_tokens=16 * len(BLOCKS),
        block_size=16,
        candidates=PODS,
        runs=runs or {},
        scores={},
        speculative={},
        loads={pod: PodLoad() for pod in PODS},
        recent_work=recent,
    )


def test_a_tie_goes_to_the_pod_with_the_least_recent_work() -> None:
    choice = choose_pod(
        request({"a": 0.3, "b": 0.1, "c": 0.2, "d": 0.4}), WEIGHTS, "ttft", PARAMETERS
    )
    assert (choice.chosen, choice.tie_broken) == ("b", False)
    assert [c.pod for c in choice.candidates] == ["b", "c", "a", "d"]
    assert choice.reason.endswith("it has the least recent work (100.0 ms, c 200.0 ms)")
    assert choice.to_dict()["candidates"][0]["recent_work_s"] == 0.1


def test_recent_work_never_outweighs_a_cheaper_estimate() -> None:
    runs = {"c": (("GPU", 1),)}  # one block cached: 1.6 ms cheaper than the others
    choice = choose_pod(request({"c": 60.0}, runs), WEIGHTS, "ttft", PARAMETERS)
    assert choice.chosen == "c" and "ahead of" in choice.reason


def test_pods_tied_on_work_too_are_broken_by_rendezvous_hashing_among_them() -> None:
    choice = choose_pod(
        request({"a": 0.1, "b": 0.1, "c": 0.5, "d": 0.5}), WEIGHTS, "ttft", PARAMETERS
    )
    assert choice.tie_broken and choice.chosen == tie_break(BLOCKS[0], ["a", "b"])
    assert choice.reason.startswith("2 pods tie")
    assert choose_pod(request({}), WEIGHTS, "ttft", PARAMETERS).chosen == tie_break(BLOCKS[0], PODS)


def test_recent_work_is_the_requests_in_flight_times_their_mean_predicted_prefill() -> None:
    now_ms = 1_760_000_000_000
    routed = RawPodState(busy_until_ms=str(now_ms), prefill_ms="50", in_flight=4)
    assert load_reading(routed, now_ms, 3.0, 0.2, 1).recent_work_s == pytest.approx(0.2)
    no_mean = RawPodState(in_flight=2)
    assert load_reading(no_mean, now_ms, 3.0, 0.2, 1).recent_work_s == pytest.approx(0.4)
    assert load_reading(RawPodState(), now_ms, 3.0, 0.2, 1).recent_work_s == 0.0
