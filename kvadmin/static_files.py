"""/static/ served by the ASGI app itself (no CDN, no separate file server).

Django's handler turns only Http404 into an answer: a path leaving the static directories
(`/static/..`) raises SuspiciousFileOperation and the server answered 500. Here it is a 400
with a plain message.
"""

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class StaticFiles(ASGIStaticFilesHandler):
    def serve(self, request: HttpRequest) -> HttpResponse:
        try:
            return super().serve(request)
        except SuspiciousOperation:
            return HttpResponseBadRequest(
                "not a static file: the path leaves the static directories\n",
                content_type="text/plain; charset=utf-8",
            )
