"""Engine KV-event publishers, emulated byte for byte (compatibility.md 4.1): a PUB socket with seq
frames, a ROUTER replay socket with a bounded buffer (both replay frame layouts and the end marker),
data-parallel ranks on offset ports, and fault switches. The batches are `wire.py`'s.
"""

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import zmq

from kvadmin.fleet.wire import Encoding, WireEvent, encode_batch
from kvadmin.index.events import Event
from kvadmin.ingest.decode import END_OF_REPLAY, SEQ_BYTES


def offset_endpoint(endpoint: str, rank: int) -> str:
    """Rank r of a data-parallel engine binds base port + r (compatibility.md 4.1), like the
    engines' `offset_endpoint_port`. A wildcard or zero port (any free port) stays as it is."""
    if rank == 0:
        return endpoint
    if endpoint.startswith("inproc://"):
        return f"{endpoint}_dp{rank}"
    if not endpoint.startswith("tcp://"):
        raise ValueError(f"only tcp:// and inproc:// endpoints take a rank offset: {endpoint}")
    base, _, port = endpoint.rpartition(":")
    if port in ("*", "0"):
        return endpoint
    return f"{base}:{int(port) + rank}"


class Publisher:
    """One engine rank's KV-event endpoints: PUB (+ an optional ROUTER replay socket).

    Publish from one thread at a time (a ZMQ socket is not thread-safe); the replay socket is
    served by a background thread, which only reads the replay buffer under a lock.

    The PUB socket is an XPUB, identical on the wire, so `wait_for_subscribers` can see
    subscriptions arrive instead of tests sleeping through ZMQ's slow-joiner window.
    """

    REPLAY_SEND_PATIENCE = 10.0
    """Seconds a replay answer may stall on a DEALER that stopped reading before it is dropped."""

    def __init__(
        self,
        endpoint: str = "tcp://127.0.0.1:0",
        replay_endpoint: str | None = "tcp://127.0.0.1:0",
        *,
        encoding: Encoding = Encoding.VLLM_MAP,
        topic: bytes = b"",
        data_parallel_rank: int = 0,
        buffer_steps: int = 10_000,
        replay_topic_frame: bool | None = None,
        hwm: int = 100_000,
        context: zmq.Context | None = None,
    ) -> None:
        """Binds at once (an engine's ports are fixed): a port in use raises `zmq.ZMQError`.
        Without a `context` the publisher owns one, so `close()` returns only once both ports
        are released and the same endpoints can be bound again at once, as a restarted engine
        does."""
        self.encoding = encoding
        self.topic = topic
        self.rank = data_parallel_rank
        self.replay_topic_frame = (
            encoding.replay_topic_frame if replay_topic_frame is None else replay_topic_frame
        )
        self.replays_served = 0
        self._next_seq = 0
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self._lock = threading.Lock()
        self._dropping: set[int] = set()
        self._publish_delay = 0.0
        self._replay_delay = 0.0
        self._subscriptions = 0
        self._stopping = threading.Event()
        self._closed = False
        self._replay_thread: threading.Thread | None = None
        self._router: zmq.Socket | None = None

        self._own_context = context is None
        self._context = zmq.Context() if context is None else context
        self._pub = self._context.socket(zmq.XPUB)
        try:
            self._pub.setsockopt(zmq.LINGER, 0)
            self._pub.setsockopt(zmq.SNDHWM, hwm)
            self._pub.setsockopt(zmq.XPUB_VERBOSER, 1)
            self._pub.bind(offset_endpoint(endpoint, data_parallel_rank))
            self.endpoint = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
            self.replay_endpoint: str | None = None
            if replay_endpoint is not None:
                self._router = self._context.socket(zmq.ROUTER)
                self._router.setsockopt(zmq.LINGER, 0)
                self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
                self._router.setsockopt(zmq.SNDTIMEO, 100)
                self._router.bind(offset_endpoint(replay_endpoint, data_parallel_rank))
                self.replay_endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        except BaseException:
            self._close_sockets()
            raise
        if self._router is not None:
            self._replay_thread = threading.Thread(
                target=self._serve_replay, name=f"kv-replay {self.replay_endpoint}", daemon=True
            )
            self._replay_thread.start()

    # Publishing -------------------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def publish(self, events: Iterable[WireEvent | Event], *, ts: float | None = None) -> int:
        """Encode and publish one batch; returns its seq."""
        return self.publish_payload(encode_batch(self.encoding, events, ts=ts, rank=self.rank))

    def publish_payload(self, payload: bytes) -> int:
        """Publish an already encoded batch (benchmarks pre-encode); returns its seq.

        Buffered for replay before it is sent, so a consumer that sees it can replay it.
        """
        if self._closed:
            raise RuntimeError("publisher is closed")
        seq = self._next_seq
        self._next_seq = seq + 1
        with self._lock:
            self._buffer.append((seq, payload))
        if seq in self._dropping:
            self._dropping.discard(seq)
        else:
            self._pub.send_multipart((self.topic, seq.to_bytes(SEQ_BYTES, "big"), payload))
        if self._publish_delay:
            time.sleep(self._publish_delay)
        return seq

    # Fault switches ---------------------------------------------------------------------------

    def restart(self) -> None:
        """Behave like a restarted engine: seq starts again at 0 and the replay buffer is
        empty. Sockets stay bound, so connected consumers see the seq fall back."""
        with self._lock:
            self._buffer.clear()
            self._next_seq = 0
            self._dropping.clear()

    def drop(self, next_n: int = 1) -> None:
        """Do not send the next `next_n` batches on PUB (they are still buffered for replay):
        the gap a slow subscriber sees when PUB's high-water mark drops messages."""
        self.drop_seqs(range(self._next_seq, self._next_seq + next_n))

    def drop_seqs(self, seqs: Iterable[int]) -> None:
        """Like `drop`, for chosen seqs (e.g. `range(5, 8)`)."""
        self._dropping.update(seqs)

    def slow(self, publish_delay: float = 0.0, replay_delay: float = 0.0) -> None:
        """Pause this long after each published batch and between replayed batches, like an
        engine under load; `slow()` restores full speed."""
        if publish_delay < 0 or replay_delay < 0:
            raise ValueError("delays are seconds >= 0")
        self._publish_delay, self._replay_delay = publish_delay, replay_delay

    # Subscribers ------------------------------------------------------------------------------

    def wait_for_subscribers(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block until `count` subscriptions matching this topic have reached the socket, so
        the next batch is delivered to them (call from the publishing thread)."""
        self._wait_for_subscriptions(lambda n: n >= count, f"{count} subscriber(s)", timeout)

    def wait_for_no_subscribers(self, timeout: float = 10.0) -> None:
        """Block until every subscription has gone (a stopped reader's disconnect reaches the
        socket late), so that a later `wait_for_subscribers` counts only new readers."""
        self._wait_for_subscriptions(lambda n: n == 0, "no subscriber", timeout)

    def _wait_for_subscriptions(
        self, done: Callable[[int], bool], what: str, timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            while self._pub.poll(0):
                message = self._pub.recv()
                if message and self.topic.startswith(message[1:]):
                    self._subscriptions += 1 if message[0] == 1 else -1
            if done(self._subscriptions):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"{self.endpoint}: {self._subscriptions} subscriber(s), not {what}, "
                    f"after {timeout}s"
                )
            self._pub.poll(int(remaining * 1000) + 1)

    # Replay -----------------------------------------------------------------------------------

    def _serve_replay(self) -> None:
        router = self._router
        assert router is not None
        while not self._stopping.is_set():
            if not router.poll(50):
                continue
            frames = router.recv_multipart()
            # Engines ignore anything but [identity, b"", start_seq].
            if len(frames) == 3 and not frames[1]:
                self._answer(frames[0], int.from_bytes(frames[2], "big"))

    def _answer(self, identity: bytes, start: int) -> None:
        with self._lock:
            batches = [(seq, payload) for seq, payload in self._buffer if seq >= start]
        for seq, payload in batches:
            if not self._send_replay(identity, seq.to_bytes(SEQ_BYTES, "big"), payload):
                return
            if self._replay_delay:
                self._stopping.wait(self._replay_delay)
        # The end marker's topic frame is empty in the topic layout, as vLLM sends it.
        if self._send_replay(identity, END_OF_REPLAY, b"", topic=b""):
            self.replays_served += 1

    def _send_replay(
        self, identity: bytes, seq_frame: bytes, payload: bytes, topic: bytes | None = None
    ) -> bool:
        assert self._router is not None
        if self.replay_topic_frame:
            frames = [identity, b"", self.topic if topic is None else topic, seq_frame, payload]
        else:
            frames = [identity, b"", seq_frame, payload]
        deadline = time.monotonic() + self.REPLAY_SEND_PATIENCE
        while not self._stopping.is_set():
            try:
                self._router.send_multipart(frames)
                return True
            except zmq.Again:  # the DEALER's queue is full: wait for it to read
                if time.monotonic() > deadline:
                    return False
            except zmq.ZMQError:  # the DEALER is gone
                return False
        return False

    # Lifecycle --------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the replay thread and close both sockets; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        if self._replay_thread is not None:
            self._replay_thread.join()
        self._close_sockets()

    def _close_sockets(self) -> None:
        self._pub.close(linger=0)
        if self._router is not None:
            self._router.close(linger=0)
        if self._own_context:
            self._context.term()  # returns once the listeners are gone: the ports are free

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Publisher {self.encoding} rank {self.rank} {self.endpoint} seq {self._next_seq}>"


def open_ranks(
    ranks: int, endpoint: str, replay_endpoint: str | None = None, **options: Any
) -> list[Publisher]:
    """One publisher per data-parallel rank, rank r on base port + r for both endpoints. If a
    rank cannot bind, the ones already open are closed. The caller closes the rest."""
    publishers: list[Publisher] = []
    try:
        for rank in range(ranks):
            publishers.append(
                Publisher(endpoint, replay_endpoint, data_parallel_rank=rank, **options)
            )
    except BaseException:
        for publisher in publishers:
            publisher.close()
        raise
    return publishers
