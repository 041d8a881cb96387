"""What-if replays a `ttft` decision under the draft's tier weights AND TTFT parameters.

One request of 640 tokens (40 blocks); the model prefills 10,000 tokens/s, T0 15 ms, kappa 1.5:

| pod | priced as holding | wait  | S_est                                | cost     |
|-----|-------------------|-------|--------------------------------------|----------|
| p1  | 40 CPU blocks     | 50 ms | 15 + (1 + 0.2 * 639) / 10 = 27.88 ms | 77.88 ms |
| p2  | nothing           | 0     | 15 + 640 / 10 = 79 ms                | 155.7 ms |

so p1 was chosen. At 100,000 tokens/s the wait dominates: p1 costs 66.3 ms, p2 29.1 ms. At a
CPU weight of 0 the reload costs as much as computing: p1 129 ms, p2 79 ms.
"""

import msgspec
import pytest

from kvadmin.routing.decisions import CandidateEstimate, append
from kvadmin.weights.config import KTHENA_DEFAULTS, WeightConfig
from kvadmin.weights.whatif import PodTraffic, preview
from scoring.ttft import TtftParameters
from tests.index import MODEL
from tests.weights.recorded import DECISIONS


def estimate(pod: str, wait_s: float, runs: list, matched: int) -> CandidateEstimate:
    return CandidateEstimate(
        pod=pod, matched_blocks=matched, speculative_blocks=0, cached_tokens=0,
        uncached_tokens=0, wait_s=wait_s, queue_wait_s=wait_s, engine_waiting=None,
        prefill_s=0.0, reload_s=0.0, work_penalty_s=0.0, cost_s=0.0, load_stale=False,
        running=0, runs=runs,
    )  # fmt: skip


def ttft_decision(p1_runs: list) -> msgspec.Struct:
    base = DECISIONS[0]
    return msgspec.structs.replace(
        base,
        decision_id="T",
        tokens=640,
        blocks=40,
        candidates=["p1", "p2"],
        chosen="p1",
        policy="ttft",
        scores=[msgspec.structs.replace(base.scores[0], runs=[("CPU", 40)], matched_blocks=40)],
        estimates=[estimate("p1", 0.05, p1_runs, 40), estimate("p2", 0.0, [], 0)],
    )


@pytest.fixture
def recorded(fresh_weights, redis_client):
    """One recorded TTFT decision, made with kthena's defaults, for the what-if to replay."""
    append(ttft_decision([("CPU", 40)]), redis_client)


def test_the_recorded_version_changes_nothing(recorded) -> None:
    result = preview(KTHENA_DEFAULTS, 10)
    assert (result.replayed, result.changed, result.priced) == (1, 0, 1)


def test_faster_prefill_makes_the_wait_count_more(recorded) -> None:
    faster = KTHENA_DEFAULTS.with_ttft(TtftParameters(prefill_tokens_per_s={MODEL: 100_000}))
    result = preview(faster, 10)
    assert result.changed == 1
    assert result.traffic == [PodTraffic("p2", 0, 1), PodTraffic("p1", 1, 0)]
    other_model = KTHENA_DEFAULTS.with_ttft(TtftParameters(prefill_tokens_per_s={"x": 100_000}))
    assert preview(other_model, 10).changed == 0, "another model's speed changes nothing"


def test_a_lower_tier_weight_prices_the_reload(recorded) -> None:
    assert preview(WeightConfig.validated({"cpu": 0.0}), 10).changed == 1
    assert preview(WeightConfig.validated({"cpu": 0.7}), 10).changed == 0


def test_an_entry_recorded_before_estimates_kept_runs_uses_the_index_runs(
    fresh_weights, redis_client
) -> None:
    append(ttft_decision([]), redis_client)  # p1 matched 40 blocks, no runs in its estimate
    assert preview(KTHENA_DEFAULTS, 10).changed == 0
    assert preview(WeightConfig.validated({"cpu": 0.0}), 10).changed == 1


def test_a_replayed_tie_keeps_the_recorded_tie_break(fresh_weights, redis_client) -> None:
    """Both pods cold and idle: they tie under any parameters; the recorded choice stands
    (its rendezvous key was a block the decision does not keep)."""
    decision = msgspec.structs.replace(
        ttft_decision([]),
        chosen="p2",
        scores=[],
        estimates=[estimate("p1", 0.0, [], 0), estimate("p2", 0.0, [], 0)],
    )
    append(decision, redis_client)
    faster = KTHENA_DEFAULTS.with_ttft(TtftParameters(first_token_s=0.5))
    assert preview(faster, 10).changed == 0
