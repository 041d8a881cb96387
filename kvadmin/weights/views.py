"""The tier-weights page: look (anyone logged in), edit and restore (the change permission).

Invalid drafts come back with status 200 and the errors beside their fields, so htmx swaps
them in; nothing is saved. A draft made from a version that is no longer the current one
answers 409 with what was saved since (the page tells htmx to swap 409s too). Without htmx
the same views work as a plain form (redirect after a successful save).
"""

from collections.abc import Sequence

import redis
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget

from kvadmin.conf import knob
from kvadmin.index.serving import index_serving
from kvadmin.redis_clients import index_client
from kvadmin.weights import export, whatif
from kvadmin.weights.active import active_weights
from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS
from kvadmin.weights.draft import Draft, DraftRow, new_row_key, parse_draft
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.overview import editor_rows, other_media
from kvadmin.weights.seen import media_in_index
from kvadmin.weights.versions import (
    EDIT_PERMISSION,
    NothingChanged,
    StaleDraft,
    current_version,
    history,
    restore_version,
    save_version,
)

PAGE = "weights/page.html"


STARTING_POINTS = {"kthena": KTHENA_DEFAULTS, "kvadmin": KVADMIN_DEFAULTS}
"""`?start=` names a shipped convention the editor's draft starts from (nothing is saved)."""


@require_GET
def weights(request: HttpRequest) -> HttpResponse:
    start = STARTING_POINTS.get(request.GET.get("start", ""))
    draft = Draft.from_config(start, current_version().version) if start else None
    return render(request, PAGE, _context(request, draft))


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def save(request: HttpRequest) -> HttpResponse:
    draft = parse_draft(request.POST)
    notice, status, saved_since = "", 200, []
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
        else:
            notice = f"Saved version {saved.version}."
            draft = None
    response = _workspace(request, draft, notice, saved_since)
    if draft is not None:
        response.status_code = status
    return response


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def restore(request: HttpRequest, version: int) -> HttpResponse:
    try:
        saved = restore_version(version, author=request.user.get_username())
    except TierWeightsVersion.DoesNotExist:
        raise Http404(f"no tier weights version {version}") from None
    except NothingChanged:
        return _workspace(request, None, f"Version {version} is already in effect.")
    return _workspace(request, None, f"Restored version {version} as version {saved.version}.")


@require_POST
@permission_required(EDIT_PERMISSION, raise_exception=True)
def preview(request: HttpRequest) -> HttpResponse:
    """Replay recorded decisions under the draft; never saves anything."""
    draft = parse_draft(request.POST)
    if draft.config is None:
        # Show the errors where they belong, in the editor, rather than in the preview panel.
        response = _workspace(request, draft, "")
        return reswap(retarget(response, "#weights"), "outerHTML")
    limit = _limit(request.POST.get("decisions"))
    result, conventions = whatif.compare(draft.config.tier_weights(), limit)
    return render(request, f"{PAGE}#whatif", {"whatif": result, "conventions": conventions})


@require_GET
@permission_required(EDIT_PERMISSION, raise_exception=True)
def new_row(request: HttpRequest) -> HttpResponse:
    """An empty (or prefilled, for "Configure") editor row to append to the draft."""
    row = DraftRow(
        new_row_key(), request.GET.get("name", "")[:64], request.GET.get("weight", "")[:32]
    )
    return render(request, f"{PAGE}#draft_row", {"item": (row, None), "can_edit": True})


@require_GET
def export_yaml(request: HttpRequest) -> HttpResponse:
    version = current_version()
    text = export.kthena_yaml(version, index_serving(index_client()))
    response = HttpResponse(text, content_type="application/yaml")
    return _attachment(request, response, f"kthena-tier-weights-v{version.version}.yaml")


@require_GET
def export_json(request: HttpRequest) -> HttpResponse:
    version = current_version()
    data = export.weights_json(version, index_serving(index_client()))
    response = JsonResponse(data, json_dumps_params={"indent": 2})
    return _attachment(request, response, f"tier-weights-v{version.version}.json")


def _workspace(
    request: HttpRequest, draft: Draft | None, notice: str, saved_since: Sequence[str] = ()
) -> HttpResponse:
    """After a write: the refreshed editor, history and export (htmx), or the page."""
    if not request.htmx and draft is None:
        if notice:
            messages.success(request, notice)
        return redirect("weights")
    context = _context(request, draft, notice) | {"saved_since": saved_since}
    template = f"{PAGE}#workspace" if request.htmx else PAGE
    return render(request, template, context)


def _context(request: HttpRequest, draft: Draft | None = None, notice: str = "") -> dict:
    current = current_version()
    config = current.weight_config
    if draft is None:
        draft = Draft.from_config(config, current.version)
    serving = None
    try:
        seen = media_in_index(index_client())
        serving = index_serving(index_client())
    except redis.RedisError:
        seen = {}
        notice = notice or "The index is unavailable: media seen in it are not shown."
    return {
        "current": current,
        "active": active_weights(),
        "can_edit": request.user.has_perm(EDIT_PERMISSION),
        "draft": draft,
        "rows": editor_rows(draft, seen),
        "others": other_media(config, seen),
        "history": history(),
        "kthena_yaml": export.kthena_yaml(current, serving),
        "kthena_compatible": config.tier_weights().kthena_compatible,
        "serving": serving,
        "notice": notice,
        "whatif_default": knob("WHATIF_DECISIONS"),
    }


def _limit(text: str | None) -> int:
    try:
        limit = int(text or knob("WHATIF_DECISIONS"))
    except ValueError:
        limit = knob("WHATIF_DECISIONS")
    return max(1, min(limit, whatif.MAX_DECISIONS))


def _attachment(request: HttpRequest, response: HttpResponse, filename: str) -> HttpResponse:
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
