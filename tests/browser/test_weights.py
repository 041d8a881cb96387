"""An editor changes tier weights and TTFT parameters in a real browser: a bad value is refused
beside its field; Enter reviews and never saves; a save or a restore shows its diff and what-if
and needs a reason, then is a new version, shown in the history and used by the next score. A
viewer finds no way to edit."""

import pytest
from django.contrib.auth.models import Permission

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.weights.active import forget_cached_weights
from kvadmin.weights.config import KTHENA_DEFAULTS, WeightConfig
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import save_version
from tests.browser.conftest import TIMEOUT_MS, log_in
from tests.index import MODEL
from tests.weights.recorded import record

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-weights-12345"
POD = "sglang-0.default"


@pytest.fixture
def weights_setup(index, django_user_model):
    """Erin may edit, Victor may look; version 1 holds kthena's defaults; the pod caches the
    first two blocks of a request in CPU memory."""
    forget_cached_weights()
    TierWeightsVersion.objects.get_or_create(
        version=1, defaults={"author": "kvadmin", "config": KTHENA_DEFAULTS.to_json()}
    )
    erin = django_user_model.objects.create_user("erin", password=PASSWORD)
    erin.user_permissions.add(Permission.objects.get(codename="change_tierweightsversion"))
    django_user_model.objects.create_user("victor", password=PASSWORD)
    Engine.objects.create(
        pod=POD, model=MODEL, kind="sglang", events_endpoint="tcp://127.0.0.1:30001"
    )
    index.store(POD, range(2), "CPU", kind="sglang")
    yield
    forget_cached_weights()


@pytest.fixture
def api_token(db) -> str:
    """A gateway's token for POST /api/v1/score."""
    return ApiToken.issue("weights-browser-test")[1]


def score(page, base_url: str, token: str) -> dict:
    """POST /api/v1/score in the server process for a request of the two cached blocks."""
    response = page.request.post(
        f"{base_url}/api/v1/score",
        headers={"Authorization": f"Bearer {token}"},
        data={"model": MODEL, "token_ids": list(range(32))},
    )
    assert response.ok, response.text()
    return response.json()


def test_an_editor_saves_a_weight_that_the_next_score_uses(
    page, asgi_server, weights_setup, api_token
) -> None:
    assert score(page, asgi_server, api_token)["scores"][0]["score"] == 80, "two CPU blocks at 0.8"
    log_in(page, asgi_server, "erin", PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Weights").click()
    cpu = page.get_by_label("Weight of cpu", exact=True)

    cpu.fill("1.5")
    page.get_by_role("button", name="Review and save…").click()
    error = page.get_by_role("alert").filter(has_text="cpu:")
    assert error.inner_text() == "cpu: must be between 0 and 1, got 1.5"
    assert page.url == f"{asgi_server}/weights/", "htmx swapped the errors in (is /static/ served?)"
    assert TierWeightsVersion.objects.count() == 1

    page.get_by_label("Weight of cpu", exact=True).fill("0.5")
    page.get_by_role("button", name="Review and save…").click()
    review = page.locator("#review")
    assert review.locator(".diff").inner_text() == "cpu 0.8 → 0.5"
    assert page.get_by_role("alert").count() == 0, "the earlier error is gone"
    page.get_by_role("button", name="Confirm: save version 2").click()
    assert page.locator("#reason-error").inner_text().startswith("give a reason")
    assert TierWeightsVersion.objects.count() == 1

    page.get_by_label("Reason").fill("CPU tier is slow")
    page.get_by_role("button", name="Confirm: save version 2").click()
    assert page.get_by_role("status").inner_text() == "Saved version 2."
    entry = page.locator("#version-2")
    assert "erin" in entry.inner_text() and "CPU tier is slow" in entry.inner_text()
    assert entry.get_by_role("listitem").inner_text() == "cpu 0.8 → 0.5"
    assert page.locator("#active-version").inner_text() == "2"
    assert page.get_by_role("alert").count() == 0

    decision = score(page, asgi_server, api_token)
    assert decision["weights_version"] == 2
    assert decision["weights"] == {"CPU": 0.5}
    assert decision["scores"][0]["score"] == 50


def test_enter_in_a_field_reviews_and_never_saves(
    page, asgi_server, weights_setup, redis_client
) -> None:
    record(redis_client)
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    cpu = page.get_by_label("Weight of cpu", exact=True)
    cpu.fill("0.5")
    cpu.press("Enter")
    review = page.locator("#review")
    assert review.locator(".diff").inner_text() == "cpu 0.8 → 0.5"
    assert "1 of the last 3 decisions would choose a different pod" in review.inner_text()
    page.get_by_label("Reason").fill("typed, then Enter")
    page.get_by_label("Reason").press("Enter")
    assert page.locator("#review .diff").inner_text() == "cpu 0.8 → 0.5", "reviewed again"
    assert page.get_by_label("Reason").input_value() == "typed, then Enter"
    page.get_by_label("T0 (s)").press("Enter")
    assert page.locator("#review").is_visible()
    assert TierWeightsVersion.objects.count() == 1
    assert page.locator("#active-version").inner_text() == "1"


def test_the_review_opens_in_view_with_the_focus_in_it(
    browser, asgi_server, weights_setup, redis_client
) -> None:
    """Enter in a field low on a 900 px window: the review is scrolled into view and the
    keyboard is in it (its Reason field), not on <body> with the review below the fold."""
    record(redis_client)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    cpu = page.get_by_label("Weight of cpu", exact=True)
    cpu.fill("0.5")
    cpu.press("Enter")
    review = page.locator("#review")
    review.wait_for()
    # scrolled to its top: a fraction of a pixel either side (sub-pixel layout)
    top = review.evaluate("element => element.getBoundingClientRect().top")
    assert -1 < top < 900 - 100, f"the review's top is at {top} px in a 900 px window"
    assert page.evaluate("document.activeElement.name") == "reason"
    assert review.evaluate("element => element.contains(document.activeElement)")
    context.close()


def test_stale_errors_clear_after_a_successful_preview(page, asgi_server, weights_setup) -> None:
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    page.get_by_label("Weight of cpu", exact=True).fill("2")
    page.get_by_label("kappa (work penalty)").fill("-1")
    page.get_by_role("button", name="Preview").click()
    page.locator("#ttft-errors-kappa").wait_for()
    assert page.get_by_role("alert").count() == 2
    page.get_by_label("Weight of cpu", exact=True).fill("0.7")
    page.get_by_label("kappa (work penalty)").fill("1")
    page.get_by_role("button", name="Preview").click()
    page.locator("#whatif h2").wait_for()
    assert page.get_by_role("alert").count() == 0
    assert page.get_by_label("Weight of cpu", exact=True).input_value() == "0.7"


def test_an_editor_edits_the_ttft_parameters_that_scoring_then_uses(
    page, asgi_server, weights_setup, api_token
) -> None:
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    page.get_by_label("T0 (s)").fill("0.25")
    page.get_by_role("button", name="Add model speed").click()
    page.get_by_label("Model of the new model speed").fill(MODEL)
    page.get_by_label("Prefill tokens/s of the new model").fill("1000")
    page.get_by_role("button", name="Review and save…").click()
    diff = page.locator("#review .diff").inner_text()
    assert "T0 (s) 0.015 → 0.25" in diff
    assert f"added prefill tokens/s of {MODEL} = 1000" in diff
    page.get_by_label("Reason").fill("measured on the new GPUs")
    page.get_by_role("button", name="Confirm: save version 2").click()
    assert page.get_by_role("status").inner_text() == "Saved version 2."
    assert page.get_by_label("T0 (s)").input_value() == "0.25"
    assert page.get_by_label(f"Prefill tokens/s of {MODEL}").input_value() == "1000"

    decision = score(page, asgi_server, api_token)
    assert decision["weights_version"] == 2
    (estimate,) = decision["estimates"]
    assert estimate["prefill_s"] == pytest.approx(0.25 + (1 + 0.2 * 31) / 1000)


def test_a_restore_shows_its_diff_and_whatif_and_needs_a_reason(
    page, asgi_server, weights_setup, redis_client
) -> None:
    record(redis_client)
    save_version(
        WeightConfig.validated({"gpu": 1.0, "cpu": 0.5, "cpu_pinned": 0.8, "disk": 0.2}),
        author="bob",
        reason="slow CPU",
        base_version=1,
    )
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    page.get_by_role("link", name="Restore version 1…").click()
    panel = page.locator("#restore-form")
    assert "Review: restore version 1 as version 3" in panel.inner_text()
    assert "cpu 0.5 → 0.8" in panel.locator(".diff").inner_text()
    assert "0 of the last 3 decisions would choose a different pod" in panel.inner_text()
    page.get_by_role("button", name="Confirm: restore version 1").click()
    assert "give a reason" in page.locator("#restore-form .form-errors").inner_text()
    assert TierWeightsVersion.objects.count() == 2
    page.get_by_label("Reason").fill("bob's change hurt")
    page.get_by_role("button", name="Confirm: restore version 1").click()
    assert page.get_by_role("status").inner_text() == "Restored version 1 as version 3."
    assert "restored version 1: bob's change hurt" in page.locator("#version-3").inner_text()


def test_a_viewer_finds_no_way_to_edit(page, asgi_server, weights_setup) -> None:
    log_in(page, asgi_server, "victor", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    main = page.get_by_role("main")
    assert main.get_by_role("cell", name="cpu", exact=True).is_visible()
    assert main.locator("input, textarea, select").count() == 0
    buttons = main.get_by_role("button")
    assert [buttons.nth(i).inner_text() for i in range(buttons.count())] == ["Copy YAML"]
    assert main.get_by_text("You can look but not change").is_visible()

    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{asgi_server}/weights/save/",
        headers={"X-CSRFToken": csrf, "Referer": f"{asgi_server}/weights/"},
        form={"row": "a", "name-a": "cpu", "weight-a": "0.1", "fallback": "1"},
    )
    assert response.status == 403
    assert TierWeightsVersion.objects.count() == 1


def test_an_editor_previews_an_added_medium_without_saving(
    page, asgi_server, weights_setup, redis_client
) -> None:
    record(redis_client)
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    page.get_by_label("Weight of cpu", exact=True).fill("0.5")
    page.get_by_role("button", name="Add medium").click()
    page.get_by_label("Name of the new medium").fill("disk")
    page.get_by_label("Weight of the new medium").fill("0.2")
    page.get_by_role("button", name="Preview").click()
    assert page.locator("#whatif-changed").inner_text() == "2"
    assert "2 of 3 would choose a different pod" in page.locator("#whatif").inner_text()
    assert TierWeightsVersion.objects.count() == 1
    assert page.locator("#active-version").inner_text() == "1"


def test_a_stale_save_shows_what_another_operator_saved_meanwhile(
    page, asgi_server, weights_setup
) -> None:
    log_in(page, asgi_server, "erin", PASSWORD)
    page.goto(f"{asgi_server}/weights/")
    page.get_by_label("Weight of cpu", exact=True).fill("0.5")
    page.get_by_role("button", name="Review and save…").click()
    page.get_by_label("Reason").fill("mine")
    save_version(
        WeightConfig.validated({"gpu": 1.0, "cpu": 0.6, "cpu_pinned": 0.8}),
        author="bob",
        reason="CPU is slow",
        base_version=1,
    )

    page.get_by_role("button", name="Confirm: save version 2").click()

    alert = page.locator(".form-errors")
    assert "version 2 was saved by bob after you loaded version 1" in alert.inner_text()
    assert "bob · “CPU is slow”: cpu 0.8 → 0.6" in alert.locator(".saved-since").inner_text()
    assert page.get_by_label("Weight of cpu", exact=True).input_value() == "0.5", "draft kept"
    assert TierWeightsVersion.objects.count() == 2
