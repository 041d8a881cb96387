"""GET /search/?q=...: jump to the one match, or list the candidates (see `lookup`)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from kvadmin.redis_clients import index_client
from kvadmin.search.lookup import search as find


@require_GET
def search(request: HttpRequest) -> HttpResponse:
    result = find(index_client(), request.GET.get("q", ""))
    if result.jump is not None:
        return redirect(result.jump)
    return render(request, "search/results.html", {"result": result, "search_query": result.query})
