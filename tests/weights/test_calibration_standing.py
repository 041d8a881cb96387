"""/weights/ shows what calibration fits beside the active parameters, per model and per pod,
with the fit's quality, on every load (no "Fit" click): real Redis, real database, the real
view."""

import html as entities
import re

import pytest

from kvadmin.weights.versions import current_version, save_version
from scoring.ttft import TtftParameters
from tests.weights.test_calibration import slow_pod_samples
from tests.weights.test_calibration_outcomes import engine, report

pytestmark = pytest.mark.django_db


def row(html: str, table: str, name: str) -> list[str]:
    """The cells of `name`'s row in the table of that id, as text."""
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    found = body.split(f'<tr data-name="{name}">', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", found, re.S)
    return [entities.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


def test_the_page_shows_each_pods_fit_against_the_active_parameters(viewing, redis_client):
    engine("vllm-0")
    engine("vllm-1")
    slow_pod_samples(redis_client, "vllm-0", 0.03, 4000)
    report(redis_client, "vllm-1", 20, speed=20_000, t0=0.01)
    html = viewing.get("/weights/").content.decode()
    assert "Calibration: fitted against active" in html
    pod, t0, fitted_t0, speed, fitted_speed, windows, outcomes, confidence, error, next_run = row(
        html, "calibration-pods", "vllm-0"
    )
    assert (t0, speed) == ("0.015 (pooled)", "10000 (model's)")
    assert fitted_t0 == "0.03" and fitted_speed.startswith("4000 (0.40x)")
    assert (windows, outcomes) == ("29", "0")
    assert confidence == "1.00" and error == "0.0%" and next_run == "steps towards it"
    other = row(html, "calibration-pods", "vllm-1")
    assert other[4].startswith("20000") and (other[5], other[6]) == ("0", "20")
    model = row(html, "calibration-models", "m")
    assert model[5:7] == ["29", "20"], "the model counts its pods' windows and outcomes"


def test_a_pod_without_evidence_says_the_models_figures_apply(viewing, redis_client):
    engine("vllm-0")
    report(redis_client, "vllm-0", 2)
    cells = row(viewing.get("/weights/").content.decode(), "calibration-pods", "vllm-0")
    assert cells[4] == "not fitted"
    assert "the model's figures apply" in cells[9]


def test_pinned_parameters_show_the_fit_but_say_nothing_moves(editing, redis_client):
    engine("vllm-0")
    slow_pod_samples(redis_client, "vllm-0", 0.03, 4000)
    pinned = current_version().weight_config.with_ttft(TtftParameters(calibration="manual"))
    save_version(pinned, author="erin", reason="pinned", base_version=current_version().version)
    html = editing.get("/weights/").content.decode()
    assert "are <strong>pinned</strong>" in html
    assert row(html, "calibration-pods", "vllm-0")[9] == "pinned"


def test_an_index_that_does_not_answer_shows_no_fit_and_the_page_still_loads(viewing, redis_down):
    response = viewing.get("/weights/")
    assert response.status_code == 200
    assert "Nothing fitted: the index is unavailable" in response.content.decode()
