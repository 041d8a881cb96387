"""The tier-weights page: look (anyone logged in), edit and restore (the change permission).

A version holds the tier weights and the `ttft` policy's parameters; both are edited here.

Safe edits: nothing is saved from the editor directly. "Review and save" (also what Enter in a
field does: the form's first submit button) answers the diff against the current version, the
what-if summary and the warnings, with a required reason and a "Confirm" button that saves.
Restoring a version shows the same review first. Saves and restores name the version they were
made from (`base_version`): another change in between answers 409 with what was saved since
(the page tells htmx to swap 409s too).

Invalid drafts come back with status 200 and the errors beside their fields, so htmx swaps them
in; nothing is saved. Preview, review, fit and the row buttons re-render the editor (#editor)
from the posted draft, so errors of an earlier attempt clear once the draft is valid. Without
htmx the same views work as a plain form (redirect after a successful save).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import redis
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_GET, require_POST

from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.index.serving import Serving, index_serving
from kvadmin.redis_clients import index_client
from kvadmin.weights import advice, calibration_step, export, fit, whatif
from kvadmin.weights.active import active_weights
from kvadmin.weights.config import (
    KTHENA_DEFAULTS,
    KVADMIN_DEFAULTS,
    Change,
    WeightConfig,
    diff,
)
from kvadmin.weights.draft import Draft, DraftRow, SpeedRow, new_row_key, parse_draft
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.overview import editor_rows, other_media
from kvadmin.weights.parameters import ParameterChange
from kvadmin.weights.seen import SeenMedium, media_in_index
from kvadmin.weights.standing import standing
from kvadmin.weights.versions import (
    EDIT_PERMISSION,
    REASON_MAX_LENGTH,
    NothingChanged,
    ReasonRequired,
    StaleDraft,
    current_version,
    history,
    restore_version,
    save_version,
)

PAGE = "weights/page.html"
RESTORE_REASON_MAX_LENGTH = REASON_MAX_LENGTH - len("restored version 1000000: ")


STARTING_POINTS = {"kthena": KTHENA_DEFAULTS, "kvadmin": KVADMIN_DEFAULTS}
"""`?start=` names a shipped convention the editor's draft starts from (nothing is saved)."""


@dataclass(frozen=True, slots=True)
class Review:
    """What confirming would change: the diff against the current version, the what-if of the
    latest decisions under the new version, and the warnings about it."""

    changes: list[Change | ParameterChange]
    whatif: whatif.WhatIf
    warnings: list[str]
    version: int | None = None
    """The version a restore puts back (None: a save of the draft)."""
    reason: str = ""
    error: str = ""


@require_GET
def weights(request: HttpRequest) -> HttpResponse:
    start = STARTING_POINTS.get(request.GET.get("start", ""))
    current = current_version()
    # A starting point sets the weights; the TTFT parameters stay the current version's.
    draft = (
        Draft.from_config(start.with_ttft(current.weight_config.ttft), current.version)
        if start
        else None
    )
    return render(request, PAGE, _context(request, draft))


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def review(request: HttpRequest) -> HttpResponse:
    """The confirm step of a save: never saves anything."""
    draft = _posted(request)
    reviewed = None
    if draft.config is not None:
        reviewed = _review(draft.config, _limit(request.POST.get("decisions")), draft.reason)
    return _editor(request, draft, review=reviewed)


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def save(request: HttpRequest) -> HttpResponse:
    draft = _posted(request)
    notice, status, saved_since, reviewed = "", 200, [], None
    if draft.base_version is None:
        draft.form_errors.append("the form does not say which version it edits: reload the page")
        status = 400
    elif draft.config is not None:
        try:
            saved = save_version(
                draft.config,
                author=request.user.get_username(),
                reason=draft.reason,
                base_version=draft.base_version,
            )
        except StaleDraft as stale:
            draft.form_errors.append(str(stale))
            saved_since, status = stale.details, 409
        except NothingChanged as refused:
            draft.form_errors.append(str(refused))
        except ReasonRequired as missing:
            limit = _limit(request.POST.get("decisions"))
            reviewed = _review(draft.config, limit, draft.reason, error=str(missing))
        else:
            notice = f"Saved version {saved.version}."
            draft = None
    response = _workspace(request, draft, notice, saved_since, review=reviewed)
    if draft is not None:
        response.status_code = status
    return response


@require_GET
@permission_required(EDIT_PERMISSION, raise_exception=True)
def restore_review(request: HttpRequest, version: int) -> HttpResponse:
    """The confirm step of a restore: what restoring `version` would change."""
    reviewed = _restore_review(version, "", "")
    if not request.htmx:
        return render(request, PAGE, _context(request, restoring=reviewed))
    return render(request, f"{PAGE}#restore_review", _context(request, restoring=reviewed))


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def restore(request: HttpRequest, version: int) -> HttpResponse:
    reason = request.POST.get("reason", "")
    base_version = _int_or_none(request.POST.get("base_version"))
    status, error, saved_since = 200, "", []
    if base_version is None:
        error, status = "the form does not say which version it replaces: reload the page", 400
    elif len(reason.strip()) > RESTORE_REASON_MAX_LENGTH:
        error = f"the reason is longer than {RESTORE_REASON_MAX_LENGTH} characters"
    else:
        try:
            saved = restore_version(
                version,
                author=request.user.get_username(),
                base_version=base_version,
                reason=reason,
            )
        except TierWeightsVersion.DoesNotExist:
            raise Http404(f"no tier weights version {version}") from None
        except ReasonRequired as missing:
            error = str(missing)
        except StaleDraft as stale:
            error, saved_since, status = str(stale), stale.details, 409
        except NothingChanged:
            return _workspace(request, None, f"Version {version} is already in effect.")
        else:
            notice = f"Restored version {version} as version {saved.version}."
            return _workspace(request, None, notice)
    reviewed = _restore_review(version, reason, error)
    return _workspace(request, None, "", saved_since, restoring=reviewed, status=status)


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def preview(request: HttpRequest) -> HttpResponse:
    """Replay recorded decisions under the draft; never saves anything."""
    draft = _posted(request)
    if draft.config is None:
        return _editor(request, draft)
    result, conventions = whatif.compare(draft.config, _limit(request.POST.get("decisions")))
    return _editor(request, draft, whatif=result, conventions=conventions)


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def fit_parameters(request: HttpRequest) -> HttpResponse:
    """Fill the draft's TTFT parameters with the ones the engines' counters fit; never saves."""
    draft = _posted(request)
    base = draft.config.ttft if draft.config else current_version().weight_config.ttft
    engines = Engine.objects.values_list("pod", "model", "kind")
    try:
        fitted = fit.fit_from_engines(index_client(), engines, base)
    except redis.RedisError as error:
        return _editor(request, draft, fit_error=f"the index is unavailable: {error}")
    if fitted.fitted:
        draft.set_parameters(fitted.parameters)
    return _editor(request, draft, fitted=fitted)


@require_GET
@permission_required(EDIT_PERMISSION, raise_exception=True)
def new_row(request: HttpRequest) -> HttpResponse:
    """An empty (or prefilled, for "Configure") editor row to append to the draft."""
    row = DraftRow(
        new_row_key(), request.GET.get("name", "")[:64], request.GET.get("weight", "")[:32]
    )
    return render(request, f"{PAGE}#draft_row", {"item": (row, None), "can_edit": True})


@require_GET
@permission_required(EDIT_PERMISSION, raise_exception=True)
def new_speed_row(request: HttpRequest) -> HttpResponse:
    """An empty model-speed row to append to the TTFT parameters."""
    return render(request, f"{PAGE}#speed_row", {"speed": SpeedRow(new_row_key())})


@require_GET
def export_yaml(request: HttpRequest) -> HttpResponse:
    version = current_version()
    text = export.kthena_yaml(version, index_serving())
    response = HttpResponse(text, content_type="application/yaml")
    return _attachment(request, response, f"kthena-tier-weights-v{version.version}.yaml")


@require_GET
def export_json(request: HttpRequest) -> HttpResponse:
    version = current_version()
    data = export.weights_json(version, index_serving())
    response = JsonResponse(data, json_dumps_params={"indent": 2})
    return _attachment(request, response, f"tier-weights-v{version.version}.json")


def _posted(request: HttpRequest) -> Draft:
    """The posted draft; a post without parameter fields keeps the current ones."""
    return parse_draft(request.POST, current_version().weight_config.ttft)


def _workspace(
    request: HttpRequest,
    draft: Draft | None,
    notice: str,
    saved_since: Sequence[str] = (),
    *,
    review: Review | None = None,
    restoring: Review | None = None,
    status: int = 200,
) -> HttpResponse:
    """After a write: the refreshed editor, history and export (htmx), or the page."""
    if not request.htmx and draft is None and restoring is None:
        if notice:
            messages.success(request, notice)
        return redirect("weights")
    context = _context(request, draft, notice, review=review, restoring=restoring)
    context["saved_since"] = saved_since
    template = f"{PAGE}#workspace" if request.htmx else PAGE
    return render(request, template, context, status=status)


def _editor(request: HttpRequest, draft: Draft, **extra) -> HttpResponse:
    """The editor alone (htmx), re-rendered from the posted draft, or the page."""
    template = f"{PAGE}#editor" if request.htmx else PAGE
    return render(request, template, _context(request, draft, **extra))


def _seen() -> tuple[dict[str, SeenMedium], str]:
    try:
        return media_in_index(), ""
    except redis.RedisError:
        return {}, "The index is unavailable: media seen in it are not shown."


def _serving() -> Serving | None:
    """Which kthena the index serves; None when Redis does not answer."""
    try:
        return index_serving()
    except redis.RedisError:
        return None


def _context(request: HttpRequest, draft: Draft | None = None, notice: str = "", **extra) -> dict:
    current = current_version()
    config = current.weight_config
    if draft is None:
        draft = Draft.from_config(config, current.version)
    seen, unavailable = _seen()
    serving = None if unavailable else _serving()  # a stall costs one timeout, not two
    # Fitting reads the decision log: only the templates that show it (the page and the
    # workspace, not the editor's re-renders) pay for it.
    calibration = (
        None if unavailable else SimpleLazyObject(lambda: standing(index_client(), current))
    )
    return {
        "current": current,
        "active": active_weights(),
        "can_edit": request.user.has_perm(EDIT_PERMISSION),
        "draft": draft,
        "rows": editor_rows(draft, seen),
        "others": other_media(config, seen),
        "warnings": advice.warnings(draft.config or config, seen),
        "offer_physical": advice.inverts_physical_order(config),
        "served_models": sorted(set(Engine.objects.values_list("model", flat=True))),
        "history": history(),
        "kthena_yaml": export.kthena_yaml(current, serving),
        "kubectl_commands": export.KUBECTL_COMMANDS,
        "kthena_compatible": config.tier_weights().kthena_compatible,
        "serving": serving,
        "notice": notice or unavailable,
        "whatif_default": knob("WHATIF_DECISIONS"),
        "restore_reason_max": RESTORE_REASON_MAX_LENGTH,
        "calibration": calibration,
        "calibration_rules": calibration_step.RULES,
        **extra,
    }


def _review(
    config: WeightConfig, limit: int, reason: str, error: str = "", version: int | None = None
) -> Review:
    seen, _ = _seen()
    return Review(
        changes=diff(current_version().weight_config, config),
        whatif=whatif.preview(config, limit),
        warnings=advice.warnings(config, seen),
        version=version,
        reason=reason,
        error=error,
    )


def _restore_review(version: int, reason: str, error: str) -> Review:
    try:
        old = TierWeightsVersion.objects.get(version=version)
    except TierWeightsVersion.DoesNotExist:
        raise Http404(f"no tier weights version {version}") from None
    return _review(old.weight_config, knob("WHATIF_DECISIONS"), reason, error, version)


def _limit(text: str | None) -> int:
    try:
        limit = int(text or knob("WHATIF_DECISIONS"))
    except ValueError:
        limit = knob("WHATIF_DECISIONS")
    return max(1, min(limit, whatif.MAX_DECISIONS))


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None


def _attachment(request: HttpRequest, response: HttpResponse, filename: str) -> HttpResponse:
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
