"""kvadmin's own scoring under the legacy value format (compatibility.md 2.7): the score is kthena
main's (every matched block 1), and the media of each pod's matched blocks, read from kvadmin's
residency, are those the tiered values named: the explanation and the `ttft` policy keep the
tiers. The index is the real writer's, switched to legacy by the real rewrite."""

import time

import pytest
from django.test import override_settings

from kvadmin.engines.models import Engine
from kvadmin.index import value_format
from kvadmin.routing import service
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.index import MODEL
from tests.routing.conftest import request_tokens

pytestmark = pytest.mark.django_db

PODS = ("vllm-0.default", "vllm-1.default")


def _runs(decision) -> dict[str, list]:
    return {scored.pod: [list(run) for run in scored.runs] for scored in decision.scores}


def test_legacy_scores_are_kthena_mains_with_the_tiers_kept(db, redis_client, index) -> None:
    for pod in PODS:
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    request = request_tokens(4)
    # vllm-0 holds all 4 blocks, the first offloaded to CPU; vllm-1 the first 3 in GPU.
    index.store(PODS[0], range(4), at=time.time())
    index.offload(PODS[0], [0], at=time.time())
    index.remove(PODS[0], [0], at=time.time())
    index.store(PODS[1], range(3), at=time.time())

    tiered = service.score(MODEL, token_ids=request, record=False, policy="kthena")
    assert {s.pod: s.score for s in tiered.scores} == {PODS[0]: 95, PODS[1]: 75}

    value_format.rewrite(redis_client, ValueFormat.LEGACY, TierWeights())
    with override_settings(KVADMIN={"INDEX_VALUE_FORMAT": "legacy", "ROUTER_VERSION": "main"}):
        legacy = service.score(MODEL, token_ids=request, record=False, policy="kthena")
    assert {s.pod: s.score for s in legacy.scores} == {PODS[0]: 100, PODS[1]: 75}
    assert (
        _runs(legacy)
        == _runs(tiered)
        == {
            PODS[0]: [["CPU", 1], ["GPU", 3]],
            PODS[1]: [["GPU", 3]],
        }
    )
