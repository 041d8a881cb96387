"""The readers stop reading speculative entries at each pod's reach
(scoring.route_state.speculative_positions): the policy must choose exactly as it did with every
entry of the request's blocks, under either policy, whatever the runs, entries and loads."""

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scoring.policy import PodLoad, RouteRequest, choose_pod
from scoring.route_state import speculative_positions
from scoring.ttft import DEFAULT_PARAMETERS
from scoring.weights import TierWeights

PODS = ["a.ns", "b.ns", "c.ns"]
WEIGHTS = TierWeights.from_config({"disk": 0.5})
MEDIA = st.sampled_from(["GPU", "CPU", "DISK", None])


@st.composite
def requests(draw: st.DrawFn) -> tuple[RouteRequest, dict[str, set[int]]]:
    n = draw(st.integers(1, 12))
    blocks = list(range(100, 100 + n))
    runs = {}
    for pod in PODS:
        media = draw(st.lists(MEDIA, max_size=n))
        if media:
            runs[pod] = tuple((medium, 1) for medium in media)
    speculative = {pod: set(draw(st.lists(st.sampled_from(blocks)))) for pod in PODS}
    loads = {
        pod: PodLoad(draw(st.floats(0, 2)), draw(st.integers(0, 8)), draw(st.booleans()))
        for pod in PODS
    }
    request = RouteRequest(
        model="m",
        blocks=blocks,
        prompt_tokens=16 * n + draw(st.integers(0, 15)),
        block_size=16,
        candidates=PODS,
        runs=runs,
        scores={pod: draw(st.integers(0, 100)) for pod in runs},
        speculative=speculative,
        loads=loads,
    )
    return request, speculative


@given(case=requests(), policy=st.sampled_from(["ttft", "kthena"]))
def test_entries_past_a_pods_reach_change_no_choice(case, policy) -> None:
    request, speculative = case
    entries = [{pod: 1.0 for pod in PODS if block in speculative[pod]} for block in request.blocks]
    matched = {pod: len(runs) for pod, runs in request.runs.items()}
    reached = {
        pod: {request.blocks[p] for p in speculative_positions(entries, matched, pod, 0)}
        for pod in PODS
    }
    full = choose_pod(request, WEIGHTS, policy, DEFAULT_PARAMETERS)
    cut = choose_pod(replace(request, speculative=reached), WEIGHTS, policy, DEFAULT_PARAMETERS)
    assert cut == full
