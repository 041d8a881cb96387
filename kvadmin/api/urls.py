from django.urls import path

from kvadmin.api import openapi, outcomes, scoring, views

urlpatterns = [
    path("events/<str:pod>", views.push_events, name="api-push-events"),
    path("score", scoring.score, name="api-score"),
    path("decisions", scoring.recent_decisions, name="api-decisions"),
    path(
        "decisions/<str:decision_id>/outcome",
        outcomes.decision_outcome,
        name="api-decision-outcome",
    ),
    path("openapi.json", openapi.openapi, name="api-openapi"),
    path("docs", openapi.docs, name="api-docs"),
]
