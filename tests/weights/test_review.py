"""Safe edits: the editor never saves directly. "Review and save" (what Enter in a field does)
shows the diff, the what-if summary and the warnings and asks for a reason; only "Confirm"
saves. Warnings name a slower tier that outweighs a faster one and media seen but unconfigured;
the export says kthena changes only when its ConfigMap is applied."""

import re

import pytest
import yaml

from kvadmin.weights.models import TierWeightsVersion
from tests.index import MODEL
from tests.weights.forms import DEFAULT_ROWS, HTMX, ttft_fields, weights_form
from tests.weights.recorded import record

pytestmark = pytest.mark.django_db(transaction=True)

DRAFT_ROWS = (("gpu", "1"), ("cpu", "0.5"), ("cpu_pinned", "0.8"), ("disk", "0.2"))


@pytest.fixture
def editing(editing, version_one):
    """Erin's client, with version 1 in the database as migration 0002 seeds it."""
    return editing


def test_the_forms_first_submit_button_reviews_so_enter_never_saves(editing) -> None:
    html = editing.get("/weights/").content.decode()
    form = html.split('<form id="weights-form"', 1)[1].split("</form>", 1)[0]
    assert 'action="/weights/review/"' in form and 'hx-post="/weights/review/"' in form
    first_submit = re.search(r'<button type="submit"[^>]*>([^<]*)<', form)
    assert first_submit.group(1) == "Review and save…"
    assert "/weights/save/" not in form, "no way to save before the review"


def test_a_review_shows_the_diff_the_whatif_and_asks_for_a_reason(
    migrated_before, editing, redis_client
) -> None:
    record(redis_client)
    data = weights_form(*DRAFT_ROWS, reason="", **ttft_fields(kappa="2"))
    html = editing.post("/weights/review/", data, **HTMX).content.decode()
    review = html.split('<section id="review"', 1)[1].split("</section>", 1)[0]
    assert "Review: save as version 2" in review
    assert "<li>cpu 0.8 → 0.5</li>" in review and "<li>added disk = 0.2</li>" in review
    assert "<li>kappa (work penalty) 1.5 → 2</li>" in review
    assert "<strong>2</strong> of the last 3\ndecisions would choose a different pod" in review
    assert "<td>p3</td><td>0</td><td>1</td><td>+1</td>" in review
    assert "<td>p1</td><td>2</td><td>1</td><td>-1</td>" in review
    assert 'hx-post="/weights/save/"' in review and "Confirm: save version 2" in review
    assert TierWeightsVersion.objects.count() == 1


def test_confirming_without_a_reason_saves_nothing_and_asks_again(editing) -> None:
    data = weights_form(*DRAFT_ROWS, reason="  ")
    response = editing.post("/weights/save/", data, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="reason-error"' in html and "give a reason" in html
    assert "Review: save as version 2" in html, "the review stays open"
    assert TierWeightsVersion.objects.count() == 1
    confirmed = editing.post(
        "/weights/save/", weights_form(*DRAFT_ROWS, reason="slow PCIe"), **HTMX
    )
    assert "Saved version 2." in confirmed.content.decode()


def test_an_invalid_draft_gets_its_errors_not_a_review(editing) -> None:
    data = weights_form(("gpu", "2"), **ttft_fields(speeds=(("m", "-5"),)))
    html = editing.post("/weights/review/", data, **HTMX).content.decode()
    assert 'id="review"' not in html
    assert "gpu: must be between 0 and 1, got 2" in html
    assert "m: must be above 0 and at most 1e+08, got -5.0" in html


def test_parameters_are_saved_with_the_weights_and_shown_in_the_history(editing) -> None:
    data = weights_form(
        *DEFAULT_ROWS,
        reason="measured",
        **ttft_fields(first_token_s="0.02", speeds=((MODEL, "12000"),)),
    )
    html = editing.post("/weights/save/", data, **HTMX).content.decode()
    assert "Saved version 2." in html
    saved = TierWeightsVersion.objects.get(version=2).weight_config
    assert saved.ttft.first_token_s == 0.02
    assert saved.ttft.prefill_tokens_per_s == ((MODEL, 12000.0),)
    history = html.split('id="version-2"', 1)[1].split("</li>\n", 3)
    assert "T0 (s) 0.015 → 0.02" in html and f"added prefill tokens/s of {MODEL} = 12000" in html
    assert history


def test_it_warns_when_a_slower_tier_outweighs_a_faster_one(
    migrated_before, editing, index
) -> None:
    index.store("sglang-0.default", [0], "DISK", kind="sglang")
    html = editing.get("/weights/").content.decode()
    assert (
        "Warning: disk weighs 1 (the fallback), more than the faster cpu (0.8), cpu_pinned (0.8)"
        in html
    )
    assert (
        "Warning: disk is in the index (1 pod) but not configured: it weighs the fallback 1" in html
    )
    data = weights_form(("gpu", "1"), ("cpu", "0.5"), ("disk", "0.6"))
    review = editing.post("/weights/review/", data, **HTMX).content.decode()
    assert "disk weighs 0.6, more than the faster cpu (0.5)" in review
    assert "is in the index" not in review, "disk is configured now"
    fixed = weights_form(("gpu", "1"), ("cpu", "0.8"), ("cpu_pinned", "0.8"), ("disk", "0.4"))
    assert "Warning" not in editing.post("/weights/review/", fixed, **HTMX).content.decode()


def test_the_export_says_how_kthena_gets_the_weights_and_leaves_parameters_out(editing) -> None:
    html = editing.get("/weights/").content.decode()
    assert "Saving here does not change kthena's router." in html
    assert "kubectl -n kthena-system edit configmap kthena-router-config" in html
    assert "kubectl -n kthena-system rollout restart deployment kthena-router" in html
    assert "kthena has no TTFT policy" in html
    text = editing.get("/weights/export/kthena.yaml").content.decode()
    assert "kappa" not in yaml.safe_load(text).__repr__()
    assert "ConfigMap. kthena's router changes only" in text
    assert editing.get("/weights/export/weights.json").json()["ttft"]["kappa"] == 1.5


def test_without_htmx_the_review_is_a_page_and_confirming_saves(editing) -> None:
    html = editing.post("/weights/review/", weights_form(*DRAFT_ROWS, reason="")).content.decode()
    assert "<h1>Tier weights</h1>" in html and "Review: save as version 2" in html
    assert 'formaction="/weights/save/"' in html
    response = editing.post("/weights/save/", weights_form(*DRAFT_ROWS, reason="ok"), follow=True)
    assert response.redirect_chain == [("/weights/", 302)]
    assert TierWeightsVersion.objects.count() == 2
