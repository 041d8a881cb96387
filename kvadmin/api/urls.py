from django.urls import path

from kvadmin.api import openapi, scoring, views

urlpatterns = [
    path("events/<str:pod>", views.push_events, name="api-push-events"),
    path("score", scoring.score, name="api-score"),
    path("decisions", scoring.recent_decisions, name="api-decisions"),
    path("openapi.json", openapi.openapi, name="api-openapi"),
]
