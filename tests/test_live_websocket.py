"""Live pages: a websocket through the real ASGI server and the Redis channel layer."""

import asyncio
from urllib.parse import urlsplit

import websockets
from asgiref.sync import async_to_sync

from kvadmin.live.groups import publish_html


def _ws_url(asgi_server: str, topic: str) -> str:
    return f"ws://{urlsplit(asgi_server).netloc}/ws/{topic}/"


async def _receive_published(url: str, cookie: str, origin: str) -> str:
    headers = {"Cookie": cookie, "Origin": origin}
    async with websockets.connect(url, additional_headers=headers) as socket:
        # Publishing may race the group join; publish until a frame arrives.
        for _ in range(50):
            await asyncio.to_thread(publish_html, "dashboard", "<tr id='hello'>hi</tr>")
            try:
                return await asyncio.wait_for(socket.recv(), timeout=0.2)
            except TimeoutError:
                continue
    raise AssertionError("no frame arrived")


def test_a_group_message_reaches_a_logged_in_socket(asgi_server, session_cookie) -> None:
    frame = async_to_sync(_receive_published)(
        _ws_url(asgi_server, "dashboard"), session_cookie, asgi_server
    )
    assert frame == "<tr id='hello'>hi</tr>"


async def _rejected(url: str, headers: dict[str, str]) -> bool:
    try:
        async with websockets.connect(url, additional_headers=headers) as socket:
            await asyncio.wait_for(socket.recv(), timeout=5)
    except (websockets.InvalidStatus, websockets.ConnectionClosed):
        return True
    return False


def test_it_rejects_anonymous_sockets(asgi_server) -> None:
    url = _ws_url(asgi_server, "feed")
    assert async_to_sync(_rejected)(url, {"Origin": asgi_server})


def test_it_rejects_a_foreign_origin(asgi_server, session_cookie) -> None:
    url = _ws_url(asgi_server, "feed")
    headers = {"Cookie": session_cookie, "Origin": "http://evil.example"}
    assert async_to_sync(_rejected)(url, headers)


def test_it_rejects_unknown_topics(asgi_server, session_cookie) -> None:
    url = _ws_url(asgi_server, "nope")
    assert async_to_sync(_rejected)(url, {"Cookie": session_cookie, "Origin": asgi_server})


def test_it_rejects_the_same_host_on_another_port(asgi_server, session_cookie) -> None:
    """A page on localhost:3000 (a dev server, another app) must not read the feed."""
    url = _ws_url(asgi_server, "feed")
    port = urlsplit(asgi_server).port
    for origin in ("http://localhost:3000", "http://127.0.0.1:3000", f"https://127.0.0.1:{port}"):
        assert async_to_sync(_rejected)(url, {"Cookie": session_cookie, "Origin": origin}), origin


def test_an_unrouted_path_is_a_404_with_a_message(asgi_server, session_cookie) -> None:
    async def refusal(url: str) -> tuple[int, bytes]:
        try:
            async with websockets.connect(
                url, additional_headers={"Cookie": session_cookie, "Origin": asgi_server}
            ):
                raise AssertionError("the socket opened")
        except websockets.InvalidStatus as error:
            return error.response.status_code, error.response.body or b""

    for path in ("/ws/", "/nowhere", "/ws/feed/extra/"):
        status, body = async_to_sync(refusal)(f"ws://{urlsplit(asgi_server).netloc}{path}")
        assert status == 404 and b"no websocket is served at" in body, path
