from django.urls import path

from kvadmin.api import views

urlpatterns = [
    path("events/<str:pod>", views.push_events, name="api-push-events"),
]
