"""The feed writes computed floats as people read them: the explanation's weighted arithmetic
and the CSV's milliseconds rounded (0.1 + 0.7 × 1 is 0.8, not 0.7999999999999999), and the
CSV carries each decision's predicted and delivered time to first token."""

import csv
import io

import msgspec
import pytest

from kvadmin.engines.models import Engine
from kvadmin.redis_clients import index_client
from kvadmin.routing import decisions, outcomes, service
from kvadmin.routing.decisions import PodExplanation
from kvadmin.routing.outcomes import Outcome
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.routing.feed_socket import decision

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model):
    """Bob is logged in."""
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    return client


def test_the_explanation_rounds_its_arithmetic(operator, redis_client) -> None:
    scored = PodExplanation(
        pod="vllm-0.default", score=27, matched_blocks=3, weighted_sum=0.1 + 0.7 + 0.3,
        media={"GPU": 1, "CPU": 2}, runs=[("GPU", 1), ("CPU", 2)],
    )  # fmt: skip
    odd = msgspec.structs.replace(
        decision("odd"), scores=[scored], weights={"GPU": 1.0, "CPU": 0.1 + 0.2}
    )
    decisions.append(odd)
    log_id = decisions.recent(1)[0].log_id
    html = operator.get(f"/feed/decisions/{log_id}/").content.decode()
    assert "= 1.1; 1.1 / 4 × 100 = 27.5 → <strong>27</strong>" in html
    assert "0.30000000000000004" not in html and "1.0999999999999999" not in html
    assert "27.499999999999996" not in html


def test_the_csv_has_rounded_times_and_both_ttfts(operator, redis_client) -> None:
    for i, pod in enumerate(PODS[:2]):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    scored = service.score(MODEL, token_ids=request_tokens(3), request_id="timed")
    reported = Outcome(cached_tokens=16, prompt_tokens=48, ttft_ms=30.04)
    assert outcomes.record(index_client(), scored, reported, 16) == "recorded"
    predicted = outcomes.predicted(scored, 16).ttft_ms

    response = operator.get("/feed/export.csv")
    (row,) = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["request"] == "timed"
    assert row["predicted TTFT ms"] == f"{predicted:.1f}".rstrip("0").rstrip(".")
    assert row["delivered TTFT ms"] == "30"
    total = row["total ms"]
    assert total and len(total.partition(".")[2]) <= 3, f"{total}: at most 3 decimals"
