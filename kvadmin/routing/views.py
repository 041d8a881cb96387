"""The live feed page and the explanation of one recorded decision (loaded when a row opens)."""

from datetime import UTC, datetime
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from kvadmin.conf import knob
from kvadmin.csv_export import EXPORT_MAX_ROWS, csv_response
from kvadmin.engines.models import Engine
from kvadmin.figures import figure
from kvadmin.redis_clients import index_client
from kvadmin.routing import decisions, outcomes
from kvadmin.routing.consumers import FEED_ROWS, POLICIES, FeedFilter, feed_pager
from kvadmin.routing.ordering import ORDERS, OrderCursor, ordered
from kvadmin.routing.presenters import DecisionRow


@require_GET
def feed(request: HttpRequest) -> HttpResponse:
    """The first page of the whole decision log in the chosen order, then live ones over
    /ws/feed/ (same filter, same order, same row fragment) and further pages on demand."""
    chosen = FeedFilter.from_params(request.GET.dict())
    page = ordered(chosen.order, FEED_ROWS, chosen.matches)
    engines = Engine.objects.order_by("model", "pod").values_list("model", "pod")
    query = urlencode(chosen.as_query())
    return render(
        request,
        "routing/feed.html",
        {
            "rows": _rows(page.decisions),
            "page": page,
            "more": feed_pager(chosen, page.next_cursor),
            "filter": chosen,
            "orders": ORDERS,
            "models": sorted({model for model, _ in engines}),
            "pods": sorted({pod for _, pod in engines}),
            "policies": POLICIES,
            "socket_url": "/ws/feed/" + (f"?{query}" if query else ""),
            "export_url": reverse("feed-csv") + (f"?{query}" if query else ""),
            "export_max": EXPORT_MAX_ROWS,
            "log_max": knob("DECISIONS_MAX"),
        },
    )


@require_GET
def feed_rows(request: HttpRequest) -> HttpResponse:
    """The next page of the feed after `?after=` (htmx: rows, then the pager again)."""
    chosen = FeedFilter.from_params(request.GET.dict())
    try:
        after = OrderCursor.parse(request.GET.get("after", ""))
    except ValueError as error:
        return HttpResponse(str(error), status=400, content_type="text/plain")
    page = ordered(chosen.order, FEED_ROWS, chosen.matches, after)
    context = {"rows": _rows(page.decisions), "more": feed_pager(chosen, page.next_cursor)}
    return render(request, "routing/feed.html#page", context)


def _rows(found: list[decisions.Decision]) -> list[DecisionRow]:
    reported = outcomes.outcomes_of(index_client(), [decision.decision_id for decision in found])
    return [DecisionRow(decision, reported.get(decision.decision_id)) for decision in found]


@require_GET
def feed_csv(request: HttpRequest) -> HttpResponse:
    """The feed's current filter over the decision log as CSV, in its order (at most
    EXPORT_MAX_ROWS decisions)."""
    chosen = FeedFilter.from_params(request.GET.dict())
    header = (
        "time (UTC)", "decision", "request", "model", "policy", "chosen", "score",
        "matched blocks", "blocks", "tie", "stale loads", "total ms",
        "predicted TTFT ms", "delivered TTFT ms", "log id",
    )  # fmt: skip
    rows = (
        (
            datetime.fromtimestamp(d.ts, UTC).isoformat(timespec="milliseconds"),
            d.decision_id,
            d.request_id or "",
            d.model,
            d.policy,
            d.chosen or "",
            decisions.chosen_score(d),
            d.longest_match,
            d.blocks,
            "yes" if d.tie_break else "no",
            " ".join(d.stale_loads),
            figure(d.timings_ms.get("total"), 3),
            figure(row.predicted.ttft_ms, 1),
            figure(row.outcome.ttft_ms if row.outcome else None, 1),
            d.log_id,
        )
        for row in _rows(ordered(chosen.order, EXPORT_MAX_ROWS, chosen.matches).decisions)
        for d in (row.decision,)
    )
    return csv_response("decisions.csv", header, rows)


@require_GET
def decision_explanation(request: HttpRequest, log_id: str) -> HttpResponse:
    return render(request, "routing/feed.html#explanation", {"row": _row(log_id)})


@require_GET
def decision_page(request: HttpRequest, log_id: str) -> HttpResponse:
    """One recorded decision on a page of its own (where the header search jumps)."""
    return render(request, "routing/decision.html", {"row": _row(log_id)})


def _row(log_id: str) -> DecisionRow:
    decision = decisions.get(log_id)
    if decision is None:
        raise Http404("this decision is no longer in the decision log")
    outcome = outcomes.outcomes_of(index_client(), [decision.decision_id]).get(decision.decision_id)
    return DecisionRow(decision, outcome)
