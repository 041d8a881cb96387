"""A simulated engine pod: one cache model and one KV-event publisher per data-parallel rank.

Like vLLM's `ZmqEventPublisher`, serving never waits on the socket: each rank's batches go
through a queue to a sender thread, which owns that rank's `Publisher` (a ZMQ socket is not
thread-safe). Everything that touches the socket (publish, restart, drop, waiting for
subscribers) runs in that thread, in the order it was asked for; a batch keeps the time it was
made at as its `ts`. The HTTP face is `http.PodApp`; `fleet.Fleet` puts both together.

Requests are spread over DP ranks round-robin (vLLM's internal load balancer knows nothing of
caches either); each rank has its own cache, stream and seq.
"""

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kvadmin.fleet.cache import CacheModel, EngineKind, ServeResult, lower_tiers_for
from kvadmin.fleet.offload import write_policy_for
from kvadmin.fleet.publisher import Publisher, open_ranks
from kvadmin.fleet.traffic import PodEndpoint
from kvadmin.fleet.wire import Encoding
from kvadmin.index.events import Event
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters
from scoring.weights import TierWeights

DEFAULT_RELOAD_WEIGHTS = TierWeights()
"""The tier weights' defaults: host memory is worth 0.8 of GPU, and so on."""

DEFAULT_ENCODING: dict[str, Encoding] = {"vllm": Encoding.VLLM_MAP, "sglang": Encoding.SGLANG_MAP}


@dataclass(frozen=True, slots=True)
class PodConfig:
    """Everything that makes one simulated pod. Ports are rank 0's; rank r uses port + r."""

    name: str
    kind: EngineKind = "vllm"
    model: str = "Qwen/Qwen3-8B"
    host: str = "127.0.0.1"
    events_port: int = 5557
    replay_port: int | None = 6557
    http_port: int = 8100
    encoding: Encoding | str | None = None
    topic: str = ""
    dp_size: int = 1
    block_size: int = 16
    gpu_blocks: int = 1024
    cpu_blocks: int = 0
    disk_blocks: int = 0
    write_policy: str | None = None
    """When blocks are copied to the lower tiers (`fleet.offload`): None is the engine's
    default (write_through); SGLang also runs write_through_selective and write_back."""
    bytes_hashes: bool = False
    max_model_len: int = 32_768
    replay_buffer: int = 10_000
    tokenizer: str = ""
    """A Hugging Face tokenizer (tokenizer.json or its directory) the pod's /tokenize and
    serving use, and its registration names; empty: the built-in toy tokenizer."""
    time_scale: float = 0.0
    """Wall seconds per second of the prefill-time model (`timing`): 1 is as fast as the model
    says, 0 is the instant pod (no queueing, nothing stays running)."""
    decode_seconds: float = 1.0
    """How long a request keeps running (and holding KV memory) after its first token, in the
    model's seconds."""
    prefill: TtftParameters = DEFAULT_PARAMETERS
    """The prefill-time model's parameters (its kappa plays no part in serving)."""
    reload_weights: TierWeights = DEFAULT_RELOAD_WEIGHTS
    """What a lower-tier hit is worth: reloading it costs (1 - w) of computing it."""
    prompt_window: int = 0
    """Above 0, a near-instant pod for gateway benchmarks: of a text prompt it tokenizes,
    serves and caches only the first this many tokens, and estimates the count
    (`fleet.prompt_window`); 0 reads every prompt whole, as an engine does."""

    def __post_init__(self) -> None:
        if self.wire_encoding.engine != self.kind:
            raise ValueError(f"{self.name}: encoding {self.wire_encoding} is not a {self.kind}'s")
        write_policy_for(self.kind, self.write_policy)  # raises for a policy the kind lacks
        if self.dp_size < 1:
            raise ValueError(f"{self.name}: dp_size must be at least 1")
        if not (0 <= self.time_scale <= 1000 and 0 <= self.decode_seconds <= 3600):
            raise ValueError(f"{self.name}: time_scale and decode_seconds out of range")
        if self.prompt_window < 0:
            raise ValueError(f"{self.name}: prompt_window must be 0 or more")

    @property
    def wire_encoding(self) -> Encoding:
        """The publisher generation: `encoding` (an `Encoding` or its value, e.g. "vllm-array"),
        by default the newest of the pod's engine kind."""
        return Encoding(self.encoding) if self.encoding else DEFAULT_ENCODING[self.kind]

    @property
    def events_endpoint(self) -> str:
        return f"tcp://{self.host}:{self.events_port}"

    @property
    def replay_endpoint(self) -> str | None:
        return None if self.replay_port is None else f"tcp://{self.host}:{self.replay_port}"

    @property
    def serve_address(self) -> str:
        """`ip:port` of its OpenAI endpoints, as a gateway names it."""
        return f"{self.host}:{self.http_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def engine_fields(self) -> dict[str, Any]:
        """The pod as an `engines.Engine` row (its field names), for registering it."""
        return {
            "pod": self.name,
            "model": self.model,
            "kind": self.kind,
            "events_endpoint": self.events_endpoint,
            "replay_endpoint": self.replay_endpoint or "",
            "topic": self.topic,
            "dp_size": self.dp_size,
            "block_size": self.block_size,
            "http_base_url": self.http_url,
            # Its OpenAI endpoints are on the same port: the gateway's address for it.
            "serve_address": self.serve_address,
            "tokenizer": self.tokenizer,
        }

    def endpoint(self) -> PodEndpoint:
        """The pod as a routing target for the traffic generator."""
        return PodEndpoint(self.name, self.http_url, self.kind, self.model)


_Call = tuple[Callable[[Publisher], Any], Future[Any]]


class _Sender:
    """One rank's publisher, driven by its own thread through a queue of calls."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name=f"sim-publisher {publisher.endpoint}", daemon=True
        )
        self._thread.start()

    def call(self, fn: Callable[[Publisher], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._calls.put((fn, future))
        return future

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, future = item
            try:
                future.set_result(fn(self.publisher))
            except BaseException as error:
                future.set_exception(error)

    def close(self) -> None:
        """Send what is queued (at full speed), then stop and release the ports."""
        self.publisher.slow()
        self._calls.put(None)
        self._thread.join()
        self.publisher.close()


class SimPod:
    """A running simulated pod: binds its event ports at once (a port in use raises
    `zmq.ZMQError`). Thread-safe; `close()` releases the ports."""

    def __init__(self, config: PodConfig) -> None:
        self.config = config
        tiers = lower_tiers_for(config.kind, config.cpu_blocks, config.disk_blocks)
        self.caches = [
            CacheModel(
                config.kind,
                config.gpu_blocks,
                tiers,
                config.block_size,
                config.bytes_hashes,
                write_policy=config.write_policy,
            )
            for _ in range(config.dp_size)
        ]
        self._lock = threading.Lock()
        self._next_rank = 0
        publishers = open_ranks(
            config.dp_size,
            config.events_endpoint,
            config.replay_endpoint,
            encoding=config.wire_encoding,
            topic=config.topic.encode(),
            buffer_steps=config.replay_buffer,
        )
        self._senders = [_Sender(publisher) for publisher in publishers]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def kind(self) -> EngineKind:
        return self.config.kind

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def max_model_len(self) -> int:
        return self.config.max_model_len

    @property
    def publishers(self) -> list[Publisher]:
        return [sender.publisher for sender in self._senders]

    def serve(self, token_ids: Sequence[int]) -> tuple[int, ServeResult]:
        """Serve one prompt on the next rank; its events are published as one batch."""
        rank = self.next_rank()
        return rank, self.serve_on(rank, token_ids)

    def next_rank(self) -> int:
        """The rank the next request goes to (round-robin)."""
        with self._lock:
            rank = self._next_rank
            self._next_rank = (rank + 1) % len(self.caches)
        return rank

    def serve_on(self, rank: int, token_ids: Sequence[int]) -> ServeResult:
        """Serve one prompt on `rank`; its events are published as one batch."""
        with self._lock:
            result = self.caches[rank].serve(token_ids)
            self._publish(rank, result.events)
        return result

    def blocks_of(self, rank: int, token_ids: Sequence[int]) -> list[str]:
        """The engine hashes of the prompt's full blocks on `rank` (what running requests
        share of their KV memory)."""
        with self._lock:
            return self.caches[rank].blocks_of(token_ids)

    def lookup(self, token_ids: Sequence[int]) -> dict[str, int]:
        """The hit by medium that serving this prompt next would report, changing nothing."""
        with self._lock:
            return self.caches[self._next_rank].lookup(token_ids)

    def clear(self) -> None:
        """Reset the prefix cache of every rank, announced with `AllBlocksCleared`."""
        with self._lock:
            for rank, cache in enumerate(self.caches):
                self._publish(rank, cache.clear())

    def restart(self, rank: int | None = None) -> None:
        """Restart the engine (or one rank): its cache is gone, unannounced, and its seq starts
        again at 0 with an empty replay buffer."""
        with self._lock:
            for r in self.ranks(rank):
                self.caches[r].clear()
                self._senders[r].call(Publisher.restart)

    def drop(self, count: int = 1, rank: int | None = None) -> None:
        """Do not send the next `count` batches on PUB (replay still has them)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            for r in self.ranks(rank):
                self._senders[r].call(lambda publisher: publisher.drop(count))

    def slow(self, delay: float = 0.0, rank: int | None = None) -> None:
        """Pause `delay` seconds after each published batch and between replayed ones (0 turns
        it off). Takes effect at once, even with batches queued."""
        for r in self.ranks(rank):
            self._senders[r].publisher.slow(delay, delay)

    def flush(self, timeout: float = 10.0) -> None:
        """Return once every batch asked for so far has been sent."""
        for future in [sender.call(lambda publisher: None) for sender in self._senders]:
            future.result(timeout)

    def wait_for_subscribers(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block until `count` subscribers are connected to every rank's PUB socket."""
        futures = [
            sender.call(lambda publisher: publisher.wait_for_subscribers(count, timeout))
            for sender in self._senders
        ]
        for future in futures:
            future.result(timeout + 1)

    def contents(self) -> set[tuple[int, str]]:
        """Ground truth over all ranks: (standardized hash, medium) of every block held. It is
        ahead of the stream while batches are queued: `flush()` before comparing an index."""
        with self._lock:
            return set().union(*(cache.contents() for cache in self.caches))

    def close(self) -> None:
        for sender in self._senders:
            sender.close()
        self._senders.clear()

    def ranks(self, rank: int | None) -> range:
        """Every rank (`rank` None) or that one; raises ValueError for one the pod lacks."""
        if rank is None:
            return range(len(self.caches))
        if not 0 <= rank < len(self.caches):
            raise ValueError(f"{self.name} has no rank {rank}")
        return range(rank, rank + 1)

    def _publish(self, rank: int, events: list[Event]) -> None:
        if events:
            ts = time.time()
            self._senders[rank].call(lambda publisher: publisher.publish(events, ts=ts))

    def __repr__(self) -> str:
        return f"<SimPod {self.name} {self.kind} x{len(self.caches)} {self.config.events_endpoint}>"
