"""The live feed page and the explanation of one recorded decision (loaded when a row opens)."""

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from kvadmin.engines.models import Engine
from kvadmin.redis_clients import index_client
from kvadmin.routing import decisions, outcomes
from kvadmin.routing.consumers import FEED_ROWS, FeedFilter
from kvadmin.routing.presenters import DecisionRow


@require_GET
def feed(request: HttpRequest) -> HttpResponse:
    """The newest decisions, then live ones over /ws/feed/ (same filter, same row fragment)."""
    chosen = FeedFilter(model=request.GET.get("model") or None, pod=request.GET.get("pod") or None)
    newest = decisions.recent(FEED_ROWS, chosen.model, chosen.pod)
    reported = outcomes.outcomes_of(index_client(), [decision.id for decision in newest])
    engines = Engine.objects.order_by("model", "pod").values_list("model", "pod")
    query = {key: value for key, value in (("model", chosen.model), ("pod", chosen.pod)) if value}
    return render(
        request,
        "routing/feed.html",
        {
            "rows": [DecisionRow(decision, reported.get(decision.id)) for decision in newest],
            "filter": chosen,
            "models": sorted({model for model, _ in engines}),
            "pods": sorted({pod for _, pod in engines}),
            "socket_url": "/ws/feed/" + (f"?{urlencode(query)}" if query else ""),
        },
    )


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
