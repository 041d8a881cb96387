"""Error pages in the site's layout, with its navigation: what happened, what to do.

Django renders templates/404.html and 403.html with the request itself. Its 500 handler and
its CSRF failure view render without it (no user, no navigation), so that a page that failed
in the middle of a request still answers; these two render with the request, and the 500 page
falls back to Django's handler when that render fails too (the database down, a broken context
processor). The 503 of a Redis outage is kvadmin/unavailable.py.
"""

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.views import defaults

log = logging.getLogger(__name__)


def server_error(request: HttpRequest) -> HttpResponse:
    try:
        return HttpResponseServerError(render_to_string("500.html", request=request))
    except Exception:
        log.exception("the 500 page failed to render with the request; rendered without it")
        return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted without its security token (CSRF_FAILURE_VIEW): most often a page left
    open across a login or a logout, so reloading it is the answer."""
    log.warning("%s %s: CSRF check failed (%s)", request.method, request.path, reason)
    problem = (
        "the form's security token was missing or out of date (the page was open across a "
        "login or logout, or cookies are blocked), so it was refused: reload the page and try "
        "again"
    )
    return TemplateResponse(request, "403.html", {"exception": problem}, status=403)
