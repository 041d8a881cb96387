"""/pods/<pod>/ shows the `ttft` policy's prediction error against delivered outcomes over
time: per stretch of minutes, the median and p90 of abs(predicted - delivered) / delivered and
the median predicted / delivered, from the outcomes recorded in the real Redis."""

import html as entities
import re
import time

import pytest

from kvadmin.routing.decisions import CandidateEstimate
from kvadmin.routing.prediction_error import Delivered, error_bin
from tests.residency.conftest import register
from tests.routing.delivered import routed

pytestmark = pytest.mark.django_db

POD = "vllm-0.default"


def rows(page: str) -> list[list[str]]:
    table = page.split('id="prediction-error"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [
        [
            entities.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        ]  # fmt: skip
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_each_minute_shows_the_median_and_p90_error_newest_first(browsing, redis_client) -> None:
    register(POD)
    minute = (int(time.time()) // 120 - 3) * 120  # a row covers two minutes of the last hour
    # Six minutes ago: predicted 0.1 s, delivered 0.1 to 1.0 s (errors 0% to 90%).
    for n in range(10):
        routed(redis_client, POD, prompt=100, predicted_s=0.1, ttft_s=0.1 / (1 - n / 10),
               at=minute + n)  # fmt: skip
    # A row later: every prediction 20% short.
    for n in range(4):
        routed(redis_client, POD, prompt=100, predicted_s=0.08, ttft_s=0.1, at=minute + 120 + n)
    # Another pod's outcomes and an outcome served elsewhere are not this pod's.
    routed(redis_client, "vllm-1.default", prompt=100, predicted_s=0.1, ttft_s=9.0)
    routed(redis_client, POD, prompt=100, predicted_s=0.1, ttft_s=9.0, served="vllm-1.default")

    page = browsing.get(f"/pods/{POD}/").content.decode()

    later, earlier = rows(page)
    assert later[1:] == ["4", "20.0%", "20.0%", "0.80"]
    assert earlier[1:] == ["10", "45.0%", "80.0%", "0.55"]
    assert earlier[0].endswith(time.strftime("%H:%M", time.gmtime(minute)))
    total = page.split('id="prediction-error-total">', 1)[1].split("</p>", 1)[0]
    assert total.startswith("Over the range: 14 outcomes, median error 25.0%")


def test_a_range_without_outcomes_says_where_they_come_from(browsing, redis_client) -> None:
    register(POD)
    routed(redis_client, POD, prompt=100, predicted_s=0.1, ttft_s=0.1, at=time.time() - 7200)
    page = browsing.get(f"/pods/{POD}/").content.decode()
    assert 'id="prediction-error"' not in page
    assert "No outcome with a time to first token in this range" in page
    day = browsing.get(f"/pods/{POD}/?range=24h").content.decode()
    assert len(rows(day)) == 1, "the last 24 hours hold it"


def test_the_p90_is_an_outcome_not_an_interpolation() -> None:
    found = [Delivered(POD, "m", "", 0.0, 10, 0, 1.0, _estimate(1.0 + n / 10)) for n in range(10)]
    assert error_bin(0, found).p90 == pytest.approx(0.8)
    assert error_bin(0, found[:1]).p90 == 0.0


def _estimate(predicted: float) -> CandidateEstimate:
    return CandidateEstimate(pod=POD, matched_blocks=0, speculative_blocks=0, cached_tokens=0,
                             uncached_tokens=10, wait_s=0.0, queue_wait_s=0.0, engine_waiting=0,
                             prefill_s=predicted, reload_s=0.0, work_penalty_s=0.0,
                             cost_s=predicted, load_stale=False)  # fmt: skip


def test_the_live_refresh_leaves_the_log_scan_out(browsing, redis_client) -> None:
    """The page's 5 s refresh swaps in its live part only, which shows no prediction error."""
    register(POD)
    routed(redis_client, POD, prompt=100, predicted_s=0.1, ttft_s=0.1)
    assert 'id="prediction-error"' in browsing.get(f"/pods/{POD}/").content.decode()
    live = browsing.get(f"/pods/{POD}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="pod-live"' in live and 'id="prediction-error"' not in live
