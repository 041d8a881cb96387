"""The 500 page in the site's layout, with its navigation.

Django's own handler renders templates/500.html without the request (no user, no
navigation), so that a page that failed in the middle of a request still answers. This one
renders it with the request, for the header an operator navigates on, and falls back to
Django's handler when that render fails too (the database down, a broken context processor).
404 and 403 need no handler: Django renders templates/404.html and 403.html with the request.
"""

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.template.loader import render_to_string
from django.views import defaults

log = logging.getLogger(__name__)


def server_error(request: HttpRequest) -> HttpResponse:
    try:
        return HttpResponseServerError(render_to_string("500.html", request=request))
    except Exception:
        log.exception("the 500 page failed to render with the request; rendered without it")
        return defaults.server_error(request)
