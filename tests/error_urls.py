"""The site's URLs and one view that fails, for the 500 page's tests (kvadmin has no page that
fails on purpose), and a context processor that fails too: then even the error page cannot
render with the request."""

from django.urls import path

from kvadmin.urls import handler500
from kvadmin.urls import urlpatterns as site


def _fails(request):
    raise RuntimeError("a bug")


def broken_context(request):
    raise RuntimeError("the database is gone")


urlpatterns = [path("fails/", _fails), *site]
__all__ = ["handler500", "urlpatterns"]
