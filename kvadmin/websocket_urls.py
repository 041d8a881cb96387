"""Websocket routes (the websocket counterpart of urls.py): the live feed's own consumer, then
one live channel per other page that updates in place; any other path is a 404."""

from django.urls import path, re_path

from kvadmin.live.consumers import LiveConsumer
from kvadmin.live.unknown import unknown_socket
from kvadmin.routing.consumers import FeedConsumer

websocket_urlpatterns = [
    path("ws/feed/", FeedConsumer.as_asgi(), {"topic": "feed"}),
    path("ws/<slug:topic>/", LiveConsumer.as_asgi()),
    re_path(r"", unknown_socket),
]
