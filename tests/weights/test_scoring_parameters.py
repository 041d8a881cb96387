"""The routing service prices candidates with the active version's TTFT parameters: a saved
version changes the next decision's estimates, and what-if replays it exactly."""

import pytest

from kvadmin.engines.models import Engine
from kvadmin.routing.service import score
from kvadmin.weights.config import KTHENA_DEFAULTS
from kvadmin.weights.versions import save_version
from kvadmin.weights.whatif import preview
from scoring.ttft import TtftParameters
from tests.index import MODEL

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_saved_version_prices_the_next_decision(fresh_weights, version_one) -> None:
    Engine.objects.create(
        pod="vllm-0.default", model=MODEL, kind="vllm", events_endpoint="tcp://127.0.0.1:1"
    )
    tokens = list(range(64))
    before = score(MODEL, token_ids=tokens, policy="ttft", record=False)
    assert before.estimates[0].prefill_s == pytest.approx(0.015 + 64 / 10_000)

    slower = TtftParameters(first_token_s=0.5, prefill_tokens_per_s={MODEL: 1000})
    save_version(
        KTHENA_DEFAULTS.with_ttft(slower), author="erin", reason="measured", base_version=1
    )
    after = score(MODEL, token_ids=tokens, policy="ttft")
    assert after.weights_version == 2
    assert after.estimates[0].prefill_s == pytest.approx(0.5 + 64 / 1000)
    assert after.estimates[0].runs == [] and after.estimates[0].running == 0
    assert preview(KTHENA_DEFAULTS.with_ttft(slower), 10).changed == 0


def test_recorded_ttft_decisions_replay_to_themselves(fresh_weights, index, version_one) -> None:
    """Real decisions (index hits, speculative entries and the virtual queue growing on the
    pod that holds the prefix) replay to the same choices under the version they were made
    with: the what-if starts from what actually happened."""
    for pod in ("sglang-0.default", "sglang-1.default"):
        Engine.objects.create(pod=pod, model=MODEL, kind="sglang", events_endpoint="tcp://h:1")
    index.store("sglang-0.default", range(2), "CPU", kind="sglang")
    made = [score(MODEL, token_ids=list(range(32 + n)), policy="ttft") for n in range(6)]
    assert {d.chosen for d in made} == {"sglang-0.default", "sglang-1.default"}, "the queue spreads"
    assert any(e.runs for d in made for e in d.estimates)
    result = preview(KTHENA_DEFAULTS, 10)
    assert (result.replayed, result.priced, result.changed) == (6, 6, 0)
