"""A live-feed websocket client for tests, against the real ASGI server, and decisions to feed
it without going through scoring."""

import asyncio
import re
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import websockets

from kvadmin.routing import decisions
from kvadmin.routing.decisions import Decision, Dropped, PodExplanation

ROW = re.compile(r'<details class="decision" id="d-(\w+)" data-request-id="([^"]*)"')
NOT_SHOWN = re.compile(r"(\d+) more not shown")


def decision(request_id: str, model: str = "m/a", chosen: str = "vllm-0.default") -> Decision:
    """A recorded-looking decision: `chosen` held 3 of 4 blocks, 2 in GPU and 1 in CPU."""
    return Decision(
        decision_id=f"{time.time_ns():x}{request_id}".replace("-", ""),
        ts=time.time(),
        request_id=request_id,
        model=model,
        input="token_ids",
        tokens=64,
        blocks=4,
        first_block=12345,
        longest_match=3,
        candidates=[chosen, "vllm-9.default"],
        chosen=chosen,
        tie_break=False,
        scores=[
            PodExplanation(
                pod=chosen,
                score=70,
                matched_blocks=3,
                weighted_sum=2.8,
                media={"GPU": 2, "CPU": 1},
                runs=[("GPU", 2), ("CPU", 1)],
            )
        ],
        dropped=Dropped(non_candidates=[], stale=[]),
        weights_version=0,
        weights={"GPU": 1.0, "CPU": 0.8},
        timings_ms={"tokenize": 0.0, "hash": 0.01, "index": 0.1, "score": 0.01, "total": 0.2},
    )


def record(*request_ids: str, model: str = "m/a", chosen: str = "vllm-0.default") -> None:
    for request_id in request_ids:
        decisions.append(decision(request_id, model, chosen))


@dataclass
class Frame:
    at: float
    """When it arrived (time.monotonic())."""
    text: str

    @property
    def request_ids(self) -> list[str]:
        return [request_id for _, request_id in ROW.findall(self.text)]

    @property
    def not_shown(self) -> int:
        return sum(int(n) for n in NOT_SHOWN.findall(self.text.split('id="feed-hidden"')[0]))


@dataclass
class FeedSocket:
    """One browser's socket: the frames it received, in order."""

    url: str
    cookie: str
    origin: str
    frames: list[Frame] = field(default_factory=list)

    @classmethod
    def to(cls, asgi_server: str, cookie: str, query: str = "") -> "FeedSocket":
        url = f"ws://{urlsplit(asgi_server).netloc}/ws/feed/{query}"
        return cls(url, cookie, asgi_server)

    async def __aenter__(self) -> "FeedSocket":
        headers = {"Cookie": self.cookie, "Origin": self.origin}
        self.socket = await websockets.connect(self.url, additional_headers=headers)
        await self.receive()  # the opening frame
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.socket.close()

    async def receive(self, timeout: float = 5.0) -> Frame:
        text = await asyncio.wait_for(self.socket.recv(), timeout)
        frame = Frame(time.monotonic(), text)
        self.frames.append(frame)
        return frame

    async def rows_until(self, count: int, timeout: float = 10.0) -> list[str]:
        """Request ids of the live rows received until at least `count` arrived."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while len(seen) < count:
            frame = await self.receive(max(deadline - time.monotonic(), 0.01))
            seen += frame.request_ids
        return seen

    async def send(self, text: str) -> None:
        await self.socket.send(text)
