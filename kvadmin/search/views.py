"""GET /search/?q=...: jump to the one match, or list the candidates (see `lookup`)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from kvadmin.index.groups import index_groups
from kvadmin.redis_clients import index_client
from kvadmin.search.lookup import search as find


@require_GET
def search(request: HttpRequest) -> HttpResponse:
    indexes = [group.client() for group in index_groups()]
    result = find(index_client(), request.GET.get("q", ""), indexes)
    if result.jump is not None:
        return redirect(result.jump)
    return render(request, "search/results.html", {"result": result, "search_query": result.query})
