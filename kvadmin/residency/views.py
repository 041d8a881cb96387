"""The residency browser: blocks, one block, pods, one pod, and "explain this prompt".

Every view reads through one service function; the pages never scan the keyspace (see the
service modules for what each reads).
"""

import time
from datetime import UTC, datetime
from urllib.parse import urlencode

from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from kvadmin.csv_export import EXPORT_MAX_ROWS, csv_response
from kvadmin.index.groups import group_of
from kvadmin.index.purge import purge_pod
from kvadmin.index.streams import StreamId
from kvadmin.metrics.timerange import parse_range
from kvadmin.residency.block_detail import UnknownBlock, block_detail, scan_engine_hashes
from kvadmin.residency.blocks import (
    NO_MEDIUM,
    SORTS,
    BlocksListing,
    BlocksQuery,
    InvalidFilter,
    UnknownModel,
    all_pages,
    browse_blocks,
    parse_query,
)
from kvadmin.residency.explain import ExplainForm, explain_request
from kvadmin.residency.pod_detail import pod_page
from kvadmin.residency.pods import UnknownPod, pod_summary, pods_overview
from kvadmin.residency.ranking import SORT_WINDOW

PURGE_PERMISSION = "engines.change_engine"


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@require_GET
def blocks(request: HtmxHttpRequest) -> HttpResponse:
    try:
        listing = browse_blocks(parse_query(request.GET.dict()))
    except UnknownModel as unknown:
        raise Http404(f"no model {unknown} in the index or the registry") from None
    except InvalidFilter as error:
        return render(request, "residency/blocks.html", {"error": str(error)}, status=400)
    context = {
        "listing": listing,
        "next_url": _next_url(listing),
        "no_medium": NO_MEDIUM,
        "export_url": _export_url(listing),
        "export_max": EXPORT_MAX_ROWS,
        "sort_links": _sort_links(listing.query),
        "sort_window": SORT_WINDOW,
    }
    if request.htmx and listing.query.after:
        return render(request, "residency/blocks.html#rows", context)
    return render(request, "residency/blocks.html", context)


@require_GET
def blocks_csv(request: HtmxHttpRequest) -> HttpResponse:
    """The current view of /blocks/ (its model, pod and medium filters, in its sort) as CSV,
    from the top (at most EXPORT_MAX_ROWS rows)."""
    params = {k: v for k, v in request.GET.dict().items() if k != "after"}
    try:
        listing = browse_blocks(parse_query(params))
    except UnknownModel as unknown:
        raise Http404(f"no model {unknown} in the index or the registry") from None
    except InvalidFilter as error:
        return HttpResponse(str(error), status=400, content_type="text/plain")
    rows = (
        (
            listing.model,
            row.std,
            " ".join(f"{owner.pod}:{owner.medium or ''}" for owner in row.owners),
            datetime.fromtimestamp(row.ts, UTC).isoformat(),
        )
        for row in all_pages(group_of(listing.model or "").client(), listing, EXPORT_MAX_ROWS)
    )
    header = ("model", "block", "owners (pod:medium)", "last stored (UTC)")
    return csv_response("blocks.csv", header, rows)


def _next_url(listing: BlocksListing) -> str:
    cursor = listing.next_cursor
    if cursor is None or listing.model is None:
        return ""
    query = _params(listing) | {"after": str(cursor)}
    return f"{reverse('blocks')}?{urlencode(query)}"


def _params(listing: BlocksListing) -> dict[str, str]:
    return listing.query.params() | ({"model": listing.model} if listing.model else {})


def _sort_links(query: BlocksQuery) -> dict[str, dict[str, str]]:
    """Per sort key, the link its column header follows (the other direction when the table
    is sorted by it, else largest first) and its aria-sort ("" when not sorted by it)."""
    links = {}
    for key in SORTS:
        current = query.sort == key
        descending = not query.descending if current else True
        params = query.params() | {"sort": key, "dir": "desc" if descending else "asc"}
        sorted_as = ("descending" if query.descending else "ascending") if current else ""
        links[key.replace("-", "_")] = {
            "url": f"{reverse('blocks')}?{urlencode(params)}",
            "aria_sort": sorted_as,
        }
    return links


@require_GET
def block(request: HtmxHttpRequest, model: str, std: int) -> HttpResponse:
    try:
        detail = block_detail(model, std)
    except UnknownBlock:
        raise Http404(f"no pod holds block {std} of {model}") from None
    return render(request, "residency/block.html", {"detail": detail})


@require_GET
def block_engine_hashes(request: HtmxHttpRequest, model: str, std: int) -> HttpResponse:
    """One bounded scan step for the engine hashes of a block on one pod (htmx fragment)."""
    pod, named, cursor = (request.GET.get(name, "") for name in ("pod", "stream", "cursor"))
    stream = StreamId.from_name(pod, named) if named else None
    if not pod or (named and stream is None) or not _integer(cursor or "0"):
        return HttpResponse("pod, stream and cursor must name a scan step", status=400)
    step = scan_engine_hashes(pod, std, stream, cursor or "0")
    next_url = ""
    if step.next_stream is not None:
        query = {"pod": pod, "stream": step.next_stream.name, "cursor": step.next_cursor}
        query = urlencode(query)
        next_url = f"{reverse('block-engine-hashes', args=[model, std])}?{query}"
    return render(request, "residency/block.html#scan_step", {"step": step, "next_url": next_url})


def _export_url(listing: BlocksListing) -> str:
    return f"{reverse('blocks-csv')}?{urlencode(_params(listing))}"


def _integer(text: str) -> bool:
    """Decimal digits of a value below 2**64: what a query parameter naming a count or scan
    cursor may hold."""
    return text.isascii() and text.isdigit() and int(text) < 2**64


@require_GET
def pods(request: HtmxHttpRequest) -> HttpResponse:
    purged = request.GET.get("purged", "")
    context = {
        "overview": pods_overview(),
        "purged": int(purged) if _integer(purged) else None,
        "purged_pod": request.GET.get("pod", ""),
    }
    return render(request, "residency/pods.html", context)


@require_GET
def pod(request: HtmxHttpRequest, pod: str) -> HttpResponse:
    try:
        page = pod_page(
            pod, span=parse_range(request.GET.dict(), time.time()), live_only=bool(request.htmx)
        )
    except UnknownPod:
        raise Http404(f"no pod {pod} in the registry or the index") from None
    purged = request.GET.get("purged", "")
    context = {
        "page": page,
        "purged": int(purged) if _integer(purged) else None,
        "can_purge": request.user.has_perm(PURGE_PERMISSION),
    }
    return render(request, "residency/pod.html", context)


@require_POST
@permission_required(PURGE_PERMISSION, raise_exception=True)
def purge(request: HtmxHttpRequest, pod: str) -> HttpResponse:
    """Remove every index entry of the pod (its engine keeps publishing: new stores come
    back). Redirects to the pod's page, or to the pods when the pod was only in the index,
    saying how many ownerships went."""
    try:
        summary = pod_summary(pod)
    except UnknownPod:
        raise Http404(f"no pod {pod} in the registry or the index") from None
    removed = purge_pod(pod)
    if summary.registered:
        return redirect(f"{reverse('pod', args=[pod])}?{urlencode({'purged': removed})}")
    return redirect(f"{reverse('pods')}?{urlencode({'purged': removed, 'pod': pod})}")


@require_http_methods(["GET", "POST"])
def explain(request: HtmxHttpRequest) -> HttpResponse:
    form = ExplainForm(request.POST or None)
    result = explain_request(form) if request.method == "POST" else None
    return render(request, "residency/explain.html", {"form": form, "result": result})
