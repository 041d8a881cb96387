"""The live feed page and the explanation of one recorded decision (loaded when a row opens)."""

from datetime import UTC, datetime
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from kvadmin.csv_export import EXPORT_MAX_ROWS, csv_response
from kvadmin.engines.models import Engine
from kvadmin.redis_clients import index_client
from kvadmin.routing import decisions, outcomes
from kvadmin.routing.consumers import FEED_ROWS, POLICIES, FeedFilter
from kvadmin.routing.presenters import DecisionRow


@require_GET
def feed(request: HttpRequest) -> HttpResponse:
    """The newest decisions, then live ones over /ws/feed/ (same filter, same row fragment)."""
    chosen = FeedFilter.from_params(request.GET.dict())
    newest = decisions.recent(FEED_ROWS, where=chosen.matches)
    reported = outcomes.outcomes_of(index_client(), [decision.id for decision in newest])
    engines = Engine.objects.order_by("model", "pod").values_list("model", "pod")
    query = urlencode(chosen.as_query())
    return render(
        request,
        "routing/feed.html",
        {
            "rows": [DecisionRow(decision, reported.get(decision.id)) for decision in newest],
            "filter": chosen,
            "models": sorted({model for model, _ in engines}),
            "pods": sorted({pod for _, pod in engines}),
            "policies": POLICIES,
            "socket_url": "/ws/feed/" + (f"?{query}" if query else ""),
            "export_url": reverse("feed-csv") + (f"?{query}" if query else ""),
            "export_max": EXPORT_MAX_ROWS,
        },
    )


@require_GET
def feed_csv(request: HttpRequest) -> HttpResponse:
    """The feed's current filter over the decision log as CSV, newest first (at most
    EXPORT_MAX_ROWS decisions)."""
    chosen = FeedFilter.from_params(request.GET.dict())
    header = (
        "time (UTC)", "decision", "request", "model", "policy", "chosen", "score",
        "matched blocks", "blocks", "tie", "stale loads", "total ms", "log id",
    )  # fmt: skip
    rows = (
        (
            datetime.fromtimestamp(d.ts, UTC).isoformat(timespec="milliseconds"),
            d.id,
            d.request_id or "",
            d.model,
            d.policy or "kthena",
            d.chosen or "",
            chosen_score.score if (chosen_score := d.score_of(d.chosen)) else 0,
            d.longest_match,
            d.n_blocks,
            "yes" if d.tie_break else "no",
            " ".join(d.stale_loads),
            d.timings_ms.get("total", ""),
            d.log_id,
        )
        for d in decisions.recent(EXPORT_MAX_ROWS, where=chosen.matches)
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
    outcome = outcomes.outcomes_of(index_client(), [decision.id]).get(decision.id)
    return DecisionRow(decision, outcome)
