"""Time in a simulated pod: each data-parallel rank prefills its requests one at a time, first
come first served, and keeps them running (holding KV memory) while they decode.

A request's prefill takes what `scoring.ttft` predicts for it (the same model the `ttft`
policy routes by: T0 + t_tok * slowdown * (uncached tokens + lower-tier hits priced at
(1 - w) of their tokens), slowdown growing with the running requests), times the pod's
`time_scale`. Its hit is measured when its prefill starts, as an engine's scheduler does, so a
request queued behind one with the same prefix finds that prefix cached. The pod answers at
the first token (the response's latency is the TTFT); the request then stays running for
`decode_seconds` (scaled too), holding ceil((prompt + max_tokens) / block_size) blocks, of
which its prompt's full blocks are shared with the running requests that hold the same ones
(vLLM's and SGLang's prefix caching reference one copy of a cached block, however many requests
use it): requests behind one system prompt hold it once. A request waits at the head of the
queue while the GPU has no room for the blocks it does not share, unless nothing else is
running (a prompt larger than the GPU still runs, alone).

`time_scale` 0 is the instant pod: no waits, no running requests, only the counters move.
A queue can be paused (the `pause` fault): requests line up until it resumes, so a test knows
who waits behind whom without racing the prefills.
"""

import asyncio
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvadmin.fleet.cache import ServeResult
from kvadmin.fleet.engine_metrics import EngineMetrics
from scoring.ttft import TtftParameters, estimate_prefill
from scoring.weights import TierWeights


@dataclass(frozen=True, slots=True)
class Served:
    rank: int
    result: ServeResult
    queued_seconds: float
    """Wall seconds between arrival and the start of the prefill."""
    prefill_seconds: float
    """Wall seconds of the prefill (the model's prediction times the time scale)."""


@dataclass(frozen=True, slots=True)
class TimingModel:
    time_scale: float
    decode_seconds: float
    parameters: TtftParameters
    weights: TierWeights
    model: str
    block_size: int
    gpu_blocks: int

    def prefill_seconds(self, result: ServeResult, running: int) -> float:
        runs = [(medium, tokens // self.block_size) for medium, tokens in result.hit_tokens.items()]
        estimate = estimate_prefill(
            self.model,
            result.prompt_tokens,
            runs,
            self.block_size,
            running,
            self.weights,
            self.parameters,
        )
        return estimate.seconds * self.time_scale


class RankQueue:
    """One rank's FIFO prefill queue and running set. Lives on the HTTP servers' event loop;
    `serve` is called with the pod's blocking cache call (which takes the pod's lock)."""

    def __init__(self, rank: int, timing: TimingModel, metrics: EngineMetrics) -> None:
        self.rank = rank
        self.timing = timing
        self.metrics = metrics
        self.waiting = 0
        self.running = 0
        self._shared: Counter[str] = Counter()
        """The running requests' prompt blocks, by engine hash: how many requests hold each."""
        self._private = 0
        """The running requests' other blocks (partial prompt tail, generated tokens)."""
        self._prefill = asyncio.Lock()  # FIFO: waiters acquire in arrival order
        self._memory = asyncio.Condition()
        self._resumed = asyncio.Event()  # cleared while paused
        self._resumed.set()
        self._finishing: set[asyncio.Task[None]] = set()  # the loop keeps only weak references

    @property
    def blocks_held(self) -> int:
        return len(self._shared) + self._private

    async def serve(
        self,
        serve_now: Callable[[int, Sequence[int]], ServeResult],
        token_ids: Sequence[int],
        max_tokens: int,
        prompt_blocks: Sequence[str],
    ) -> Served:
        """`serve_now(rank, token_ids) -> ServeResult` makes the cache change; it runs when the
        request's prefill starts. `prompt_blocks`: the engine hashes of the prompt's full blocks
        (`PrefixCache.blocks_of`), shared with the running requests that hold them."""
        arrived = time.monotonic()
        self.waiting += 1
        self._publish()
        shared = tuple(prompt_blocks)
        private = math.ceil((len(token_ids) + max_tokens) / self.timing.block_size) - len(shared)
        async with self._prefill:
            await self._resumed.wait()
            async with self._memory:
                await self._memory.wait_for(lambda: self._fits(shared, private))
            self.waiting -= 1
            started = time.monotonic()
            result = serve_now(self.rank, token_ids)
            seconds = self.timing.prefill_seconds(result, self.running)
            self.running += 1
            self._shared.update(shared)
            self._private += private
            self._publish()
            await asyncio.sleep(seconds)
        self.metrics.prefilled(self.rank, result.prompt_tokens, result.cached_tokens, seconds)
        decode = self.timing.decode_seconds * self.timing.time_scale
        finish = (self._schedule_finish, shared, private, max_tokens)
        asyncio.get_running_loop().call_later(decode, *finish)
        return Served(self.rank, result, started - arrived, seconds)

    def _fits(self, shared: tuple[str, ...], private: int) -> bool:
        """Whether a request's blocks fit beside the running requests' (or nothing runs)."""
        new = private + sum(key not in self._shared for key in shared)
        return not self.running or self.blocks_held + new <= self.timing.gpu_blocks

    def pause(self) -> None:
        """Hold every prefill from now on: requests keep arriving and wait in line, in order
        (the waiting gauge counts them), as behind an engine step that does not end."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    def _schedule_finish(self, shared: tuple[str, ...], private: int, generated: int) -> None:
        task = asyncio.ensure_future(self._finish(shared, private, generated))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    async def _finish(self, shared: tuple[str, ...], private: int, generated: int) -> None:
        async with self._memory:
            self.running -= 1
            self._shared.subtract(shared)
            self._shared = +self._shared
            self._private -= private
            self._memory.notify_all()
        self.metrics.generated(self.rank, generated)
        self._publish()

    def _publish(self) -> None:
        self.metrics.set_load(
            self.rank, self.running, self.waiting, self.blocks_held / self.timing.gpu_blocks
        )
