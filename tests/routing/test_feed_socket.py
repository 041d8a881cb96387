"""/ws/feed/: logged-in operators get the newest decisions on open, then new ones live, filtered
by model and pod, coalesced to at most 10 frames a second, paused and resumed on request."""

import asyncio
import json
import time

import pytest
import websockets
from asgiref.sync import async_to_sync

from tests.routing.feed_socket import FeedSocket, record

pytestmark = pytest.mark.django_db(transaction=True)


def _run(coroutine_function) -> object:
    return async_to_sync(coroutine_function)()


def test_anonymous_sockets_are_refused(asgi_server, redis_client) -> None:
    async def attempt() -> None:
        socket = FeedSocket.to(asgi_server, cookie="")
        async with socket:
            pass

    with pytest.raises(websockets.InvalidStatus):
        _run(attempt)


def test_it_opens_with_the_newest_decisions(asgi_server, session_cookie, redis_client) -> None:
    record(*(f"old-{n}" for n in range(60)))

    async def opening() -> str:
        async with FeedSocket.to(asgi_server, session_cookie) as socket:
            return socket.frames[0]

    frame = _run(opening)
    assert frame.request_ids == [f"old-{n}" for n in range(59, 9, -1)]  # 50, newest first
    assert 'data-state="live"' in frame.text


def test_new_decisions_arrive_live(asgi_server, session_cookie, redis_client) -> None:
    async def live() -> list[str]:
        async with FeedSocket.to(asgi_server, session_cookie) as socket:
            await asyncio.to_thread(record, "a", "b", "c")
            return await socket.rows_until(3)

    assert sorted(_run(live)) == ["a", "b", "c"]


def test_filters_apply_per_socket(asgi_server, session_cookie, redis_client) -> None:
    record("before-a", model="m/a")
    record("before-b", model="m/b")

    async def filtered() -> tuple[list[str], list[str], list[str], list[str]]:
        by_model = FeedSocket.to(asgi_server, session_cookie, "?model=m/b")
        by_pod = FeedSocket.to(asgi_server, session_cookie, "?pod=sglang-3.default")
        async with by_model, by_pod:
            await asyncio.to_thread(record, "a1", model="m/a")
            await asyncio.to_thread(record, "b1", model="m/b")
            await asyncio.to_thread(record, "p1", chosen="sglang-3.default")
            await asyncio.to_thread(record, "b2", model="m/b")
            model_rows = await by_model.rows_until(2)
            pod_rows = await by_pod.rows_until(1)
            return (
                by_model.frames[0].request_ids,
                model_rows,
                by_pod.frames[0].request_ids,
                pod_rows,
            )

    opened_model, model_rows, opened_pod, pod_rows = _run(filtered)
    assert opened_model == ["before-b"] and sorted(model_rows) == ["b1", "b2"]
    assert opened_pod == [] and pod_rows == ["p1"]


def test_a_burst_is_coalesced_into_few_frames(asgi_server, session_cookie, redis_client) -> None:
    total = 1000

    async def burst() -> tuple[FeedSocket, float]:
        async with FeedSocket.to(asgi_server, session_cookie) as socket:

            async def collect() -> None:
                while sum(len(f.request_ids) + f.not_shown for f in socket.frames[1:]) < total:
                    await socket.receive()

            collecting = asyncio.create_task(collect())
            started = time.monotonic()
            await asyncio.to_thread(record, *(f"r{n}" for n in range(total)))  # one by one
            await collecting
            return socket, started

    socket, started = _run(burst)
    live = [frame for frame in socket.frames[1:] if frame.request_ids]
    rows = [request_id for frame in live for request_id in frame.request_ids]
    assert len(rows) + sum(frame.not_shown for frame in live) == total
    assert all(len(frame.request_ids) <= 25 for frame in live)
    assert f"r{total - 1}" in rows and sum(frame.not_shown for frame in live) > 0
    # At most 10 frames a second: the server sent them all between the first decision and
    # the last frame's arrival here, however late the feed delivered them (n frames 0.1 s
    # apart span (n - 1) / 10 s).
    span = live[-1].at - started
    assert len(live) <= 10 * span + 1, (len(live), span)


def test_pausing_counts_rows_and_resuming_shows_them(
    asgi_server, session_cookie, redis_client
) -> None:
    async def pause_resume() -> tuple[str, list[str]]:
        async with FeedSocket.to(asgi_server, session_cookie) as socket:
            await socket.send(json.dumps({"action": "pause", "HEADERS": {}}))
            frame = await socket.receive()
            assert 'aria-pressed="true"' in frame.text
            await asyncio.to_thread(record, "p1", "p2", "p3")
            counted = ""
            while "3 new while paused" not in counted:
                frame = await socket.receive()
                assert frame.request_ids == []
                counted = frame.text
            await socket.send(json.dumps({"action": "resume", "HEADERS": {}}))
            return counted, await socket.rows_until(3)

    counted, rows = _run(pause_resume)
    assert "Resume" in counted
    assert rows == ["p3", "p2", "p1"]
