"""The site's URLs and one view that fails, for the 500 page's test: kvadmin has no page that
fails on purpose."""

from django.urls import path

from kvadmin.urls import handler500
from kvadmin.urls import urlpatterns as site


def _fails(request):
    raise RuntimeError("a bug")


urlpatterns = [path("fails/", _fails), *site]
__all__ = ["handler500", "urlpatterns"]
