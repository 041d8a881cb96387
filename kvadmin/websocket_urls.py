"""Websocket routes (the websocket counterpart of urls.py): the live feed's own consumer, then
one live channel per other page that updates in place."""

from django.urls import path

from kvadmin.live.consumers import LiveConsumer
from kvadmin.routing.consumers import FeedConsumer

websocket_urlpatterns = [
    path("ws/feed/", FeedConsumer.as_asgi(), {"topic": "feed"}),
    path("ws/<slug:topic>/", LiveConsumer.as_asgi()),
]
