from django.urls import path, re_path

from kvadmin.routing import views

urlpatterns = [
    path("feed/", views.feed, name="feed"),
    path("feed/export.csv", views.feed_csv, name="feed-csv"),
    path("feed/rows/", views.feed_rows, name="feed-rows"),
    re_path(
        r"^feed/decisions/(?P<log_id>[0-9]+-[0-9]+)/$",
        views.decision_explanation,
        name="feed-decision",
    ),
    re_path(r"^decisions/(?P<log_id>[0-9]+-[0-9]+)/$", views.decision_page, name="decision"),
]
