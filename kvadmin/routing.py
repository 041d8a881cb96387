"""Websocket routes: one live channel per page that updates in place."""

from django.urls import path

from kvadmin.live.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/<slug:topic>/", LiveConsumer.as_asgi()),
]
