"""The ingest loop: consume every owned stream's ZMQ messages and apply them to the index.

A plain class with a clean stop, run by the Celery worker bootstep or by `manage.py ingest`.
One thread polls all owned SUB sockets. Per stream it keeps the last applied seq (also in
Redis, written atomically with each batch) and:

1. on claiming a stream, connects its SUB socket and first asks the replay socket for
   everything after the last applied seq, so batches published before this worker started,
   or while another worker died, are not lost while the engine still buffers them;
2. applies consecutive batches, many per Redis round trip, sent ahead of the replies: Redis
   applies a run of batches while the loop decodes the next (see `ApplySession`);
3. on a gap, replays the missing batches; what the engine no longer buffers is counted lost
   and, when configured, the stream's entries are purged (the index can no longer be trusted);
4. on a seq going backwards (publisher restart), purges the stream's entries and replays the
   new run from 0; so too when the first batch after connecting has an applied seq but was
   published after the last applied batch (a restart while nobody read).

Any failure of a round (Redis away, LOADING or BUSY, a MOVED reply, the database, a bug) drops
every stream; they are reclaimed with exponential backoff (`kvadmin.loop_guard`) and resume
from the last applied seq. Nothing is applied twice: the applier refuses seqs at or below it.
"""

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import blake2b

import redis
import zmq

from kvadmin.index import status
from kvadmin.index.events import EventBatch
from kvadmin.index.session import ApplySession
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import (
    BadFrames,
    UndecodableBatch,
    decode_batch,
    split_frames,
    undecodable_batch,
)
from kvadmin.ingest.leases import LeaseKeeper, Leases
from kvadmin.ingest.replay import Replayed, ReplayFailed, request_replay
from kvadmin.ingest.streams import SeqAction, StreamSpec, classify_seq
from kvadmin.log_once import OncePerKind
from kvadmin.loop_guard import LoopGuard
from kvadmin.metrics import recorder

log = logging.getLogger(__name__)

MAX_MESSAGES_PER_ROUND = 256
"""Messages read from one stream before the next ready stream's turn (and housekeeping's)."""
FLUSH_BATCHES = 32
"""A stream's decoded batches go to Redis in runs of this many (about one script call's worth
of blocks), so Redis applies one run while the loop decodes the next."""
APPLY_WINDOW = 4
"""Script calls that may be waiting for their reply: Redis's queue of work while the loop
decodes (about 10 ms of it)."""
HOUSEKEEPING_SECONDS = 1.0
QUIET_PROBE_SECONDS = 2.0
"""A stream quiet for this long is asked for what it published since: PUB drops the messages
of a subscriber that is still joining or too slow, and when nothing follows a lost tail no
gap ever shows. It also notices a quiet publisher's restart."""


@dataclass
class _Stream:
    spec: StreamSpec
    sub: zmq.Socket
    last_applied: int
    last_live: int = -1
    pending: list[tuple[int, EventBatch]] = field(default_factory=list)
    quiet_since: float = field(default_factory=time.monotonic)


def payload_digest(payload: bytes) -> str:
    return blake2b(payload, digest_size=8).hexdigest()


class IngestLoop:
    def __init__(
        self,
        applier: Applier,
        load_streams: Callable[[], list[StreamSpec]],
        registry_version: Callable[[], int],
        lease_seconds: float = 10.0,
        purge_on_gap: bool = True,
        worker_id: str | None = None,
    ) -> None:
        """The loop writes the index through `applier` (the worker's orders media by the
        active weights: `kvadmin.weights.active.active_applier`) and keeps its leases and
        stream status on the applier's Redis client."""
        self.client = client = applier.client
        self.load_streams = load_streams
        self.registry_version = registry_version
        self.purge_on_gap = purge_on_gap
        self.worker_id = worker_id or f"{socket.gethostname()}:{threading.get_native_id()}"
        self.leases = Leases(client, self.worker_id, lease_seconds)
        self.applier = applier
        self.session: ApplySession | None = None
        self.context = zmq.Context.instance()
        self.poller = zmq.Poller()
        self.owned: dict[StreamId, _Stream] = {}
        self.by_socket: dict[zmq.Socket, _Stream] = {}
        self.wanted: dict[StreamId, StreamSpec] = {}
        self.seen_version: int | None = None
        self.stop_event = threading.Event()
        self.lease_keeper = LeaseKeeper(self.leases, self.stop_event)
        self.failures = OncePerKind(log)
        self.guard = LoopGuard("ingest", log)

    # Lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        next_housekeeping = 0.0
        log.info("ingest loop %s started", self.worker_id)
        self.lease_keeper.start()
        while not self.stop_event.is_set():
            try:
                if time.monotonic() >= next_housekeeping:
                    self.housekeeping()
                    next_housekeeping = time.monotonic() + HOUSEKEEPING_SECONDS
                self.poll_once(timeout_ms=100)
                self.guard.succeeded(self.client)
            except Exception as error:
                # Whatever it was (Redis away, LOADING, BUSY or MOVED; the database; a bug),
                # it must not end ingestion in this worker for good.
                self.recover(self.guard.failed(error))
                next_housekeeping = 0.0
        self.lease_keeper.join()
        self.drop_all(release=True)
        with contextlib.suppress(redis.RedisError):
            self.leases.leave()
        log.info("ingest loop %s stopped", self.worker_id)

    def recover(self, backoff: float) -> None:
        """Let go of every stream (their leases lapse unless Redis returns first) and wait."""
        self.drop_all(release=False)
        self.seen_version = None
        self.stop_event.wait(backoff)

    def drop_all(self, release: bool) -> None:
        """Drop every stream, whatever fails meanwhile, and close the session. Handing the
        streams over (`release`), each first waits for what was sent (`drop`); after a failure
        the session is closed first: its unread replies are lost, each stream's last_seq in
        Redis tells what was applied."""
        if not release:
            self._guarded(self.close_session)
        for stream_id in list(self.owned):
            if not self._guarded(self.drop, stream_id, release):
                self.owned.pop(stream_id, None)
        self._guarded(self.close_session)

    def _guarded(self, step: Callable[..., object], *args: object) -> bool:
        """Run a step of letting go; a failure is counted and logged, never raised."""
        try:
            step(*args)
        except Exception as error:
            self.guard.failed(error)
            return False
        return True

    # Ownership -------------------------------------------------------------------------------

    def housekeeping(self) -> None:
        version = self.registry_version()
        if version != self.seen_version:
            self.wanted = {spec.id: spec for spec in self.load_streams()}
            self.seen_version = version
        for stream_id in list(self.owned):
            spec = self.wanted.get(stream_id)
            if spec is None or spec != self.owned[stream_id].spec:
                self.drop(stream_id, release=True)
        for stream_id in self.lease_keeper.take_lost():
            if stream_id in self.owned and self.leases.owner(stream_id) != self.worker_id:
                log.warning("ingest: lost the lease of %s", stream_id)
                self.drop(stream_id, release=False)
        alive = self.leases.heartbeat(time.time())
        share = self.leases.fair_share(len(self.wanted), alive)
        for stream_id in sorted(self.owned)[share:]:
            self.drop(stream_id, release=True)
        for stream_id, spec in sorted(self.wanted.items()):
            if len(self.owned) >= share:
                break
            if stream_id not in self.owned and self.leases.claim(stream_id):
                self.take(spec)
        now = time.monotonic()
        for stream in self.owned.values():
            if now - stream.quiet_since >= QUIET_PROBE_SECONDS:
                self.catch_up(stream)
                stream.quiet_since = now

    def take(self, spec: StreamSpec) -> None:
        sub = self.context.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, 100_000)
        sub.setsockopt(zmq.SUBSCRIBE, spec.topic)
        sub.connect(spec.events_endpoint)
        last_applied = status.last_seq(self.client, spec.id)
        if last_applied < 0:  # a first connection: nothing of this run is applied yet
            status.started(self.client, spec.id)
        stream = _Stream(spec=spec, sub=sub, last_applied=last_applied)
        self.owned[spec.id] = stream
        self.lease_keeper.owned = tuple(self.owned)
        self.by_socket[sub] = stream
        self.poller.register(sub, zmq.POLLIN)
        log.info(
            "ingest: reading %s from %s (after seq %d)", spec.id, spec.events_endpoint, last_applied
        )
        self.catch_up(stream)
        status.connected(self.client, spec.id, self.worker_id)

    def drop(self, stream_id: StreamId, release: bool) -> None:
        """Stop reading a stream; with `release`, hand its lease back at once (best effort:
        with Redis away the lease simply lapses)."""
        with contextlib.suppress(redis.RedisError):
            self.settle()
        stream = self.owned.pop(stream_id)
        self.lease_keeper.owned = tuple(self.owned)
        self.by_socket.pop(stream.sub, None)
        self.poller.unregister(stream.sub)
        stream.sub.close()
        if release:
            with contextlib.suppress(redis.RedisError):
                status.disconnected(self.client, stream_id)
                self.leases.release(stream_id)

    # Messages --------------------------------------------------------------------------------

    def poll_once(self, timeout_ms: int) -> None:
        ready = self.poller.poll(0)
        if not ready:
            self.settle()  # idle: read the replies and record what was applied
            ready = self.poller.poll(timeout_ms)
        for sub, _ in ready:
            stream = self.by_socket[sub]
            for _ in range(MAX_MESSAGES_PER_ROUND):
                try:
                    frames = sub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.receive(stream, frames)
                if len(stream.pending) >= FLUSH_BATCHES:
                    self.flush(stream)
            self.flush(stream)
            # After reading, not before: a busy round can outlast QUIET_PROBE_SECONDS, and a
            # stream that just delivered is not quiet.
            stream.quiet_since = time.monotonic()

    def receive(self, stream: _Stream, frames: list[bytes]) -> None:
        try:
            _topic, seq, payload = split_frames(frames)
        except BadFrames as error:
            status.count(self.client, stream.spec.id, "bad_frames")
            self.failures.failed(f"frames:{stream.spec.id}", "ingest %s: %s", stream.spec.id, error)
            return
        action = classify_seq(seq, self._last_seen(stream), stream.last_live)
        if action is SeqAction.DUPLICATE and stream.last_live < 0:
            action = self._first_since_connecting(stream, payload)
        if action is SeqAction.RESTART:
            self.restarted(stream)
        if action is SeqAction.GAP:
            status.count(self.client, stream.spec.id, "gaps")
        if action in (SeqAction.GAP, SeqAction.RESTART):
            self.catch_up(stream, until=seq)
        # After the catch-up: a restart it found starts the live seqs afresh (`restarted`).
        stream.last_live = seq
        if action is not SeqAction.DUPLICATE and seq > self._last_seen(stream):
            self.queue(stream, seq, payload)

    def _first_since_connecting(self, stream: _Stream, payload: bytes) -> SeqAction:
        """The first live batch has a seq applied already: a duplicate, unless the engine
        published it after the last applied batch. Then the publisher restarted while nobody
        read it, which the seq alone cannot tell (nor, without a replay socket, anything
        else). A duplicate was published before the last applied batch, on the same clock."""
        self.settle()  # the batches sent so far (a catch-up's replay) set that time
        last = status.last_batch_ts(self.client, stream.spec.id)
        try:
            published = decode_batch(payload).ts
        except UndecodableBatch:
            return SeqAction.DUPLICATE
        if last is not None and published > last:
            return SeqAction.RESTART
        return SeqAction.DUPLICATE

    def _last_seen(self, stream: _Stream) -> int:
        return stream.pending[-1][0] if stream.pending else stream.last_applied

    def queue(self, stream: _Stream, seq: int, payload: bytes) -> None:
        try:
            batch = decode_batch(payload)
        except UndecodableBatch as error:
            self.failures.failed(
                f"decode:{stream.spec.id}:{error.kind}",
                "ingest %s: seq %d: %s",
                stream.spec.id,
                seq,
                error,
            )
            batch = undecodable_batch()
        batch.digest = payload_digest(payload)
        stream.pending.append((seq, batch))

    def flush(self, stream: _Stream) -> None:
        """Send the stream's pending batches to Redis; they count as applied from here on (a
        failure before their replies drops every stream, which resume from Redis)."""
        if not stream.pending:
            return
        batches, stream.pending = stream.pending, []
        if self.session is None:
            self.session = self.applier.session(APPLY_WINDOW)
        session, stream_id = self.session, stream.spec.id
        started = time.perf_counter()

        def applied(_results: object) -> None:
            pipe = self.client.pipeline(transaction=False)
            recorder.record_apply(pipe, stream_id, batches, time.perf_counter() - started)
            session.send(pipe)

        session.submit(stream.spec, batches, done=applied)
        stream.last_applied = batches[-1][0]

    def settle(self) -> None:
        """Wait until Redis applied everything sent: before anything that reads the index or
        must follow the batches sent so far (replays, purges, handing a stream over)."""
        if self.session is not None:
            try:
                self.session.wait()
            except BaseException:
                self.close_session()
                raise

    def close_session(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    def catch_up(self, stream: _Stream, until: int | None = None) -> None:
        """Replay what the engine buffered after the last seen seq (before `until` if given).

        The request starts AT the last seen seq: an engine that still buffers that batch, with
        the payload that was applied, proves the stream continues; one that buffers nothing
        from there on, or another batch under that seq, has restarted since.
        """
        self.flush(stream)
        self.settle()
        spec, since = stream.spec, self._last_seen(stream)
        if spec.replay_endpoint is None:
            if until is not None:
                self.lost(stream, until - since - 1)
            return
        try:
            replayed = request_replay(self.context, spec.replay_endpoint, max(since, 0))
            if since >= 0 and not self._continues(stream, since, replayed):
                self.restarted(stream)
                since = -1
                replayed = request_replay(self.context, spec.replay_endpoint, 0)
        except ReplayFailed as error:
            self.failures.failed(f"replay:{spec.id}", "ingest %s: %s", spec.id, error)
            if until is not None:
                self.lost(stream, until - since - 1)
            return
        self.failures.recovered(f"replay:{spec.id}")
        if replayed and replayed[0].seq > since + 1:
            self.lost(stream, replayed[0].seq - since - 1)
        missed = [
            batch
            for batch in replayed
            if batch.seq > self._last_seen(stream) and (until is None or batch.seq < until)
        ]
        if missed or until is not None:
            status.count(self.client, spec.id, "replays")
        for batch in missed:
            self.queue(stream, batch.seq, batch.payload)
        self.flush(stream)

    def _continues(self, stream: _Stream, since: int, replayed: list[Replayed]) -> bool:
        if not replayed:
            return False
        if replayed[0].seq != since:
            return True  # `since` left the buffer: lost batches, counted by the caller
        applied = status.last_digest(self.client, stream.spec.id)
        return applied is None or applied == payload_digest(replayed[0].payload)

    def lost(self, stream: _Stream, batches: int) -> None:
        """Batches the engine no longer has: the stream's entries can't be trusted any more."""
        if batches <= 0:
            return
        status.count(self.client, stream.spec.id, "batches_lost", batches)
        self.failures.failed(
            f"lost:{stream.spec.id}", "ingest %s: %d batches lost", stream.spec.id, batches
        )
        if self.purge_on_gap:
            self.purge(stream)

    def restarted(self, stream: _Stream) -> None:
        """A new run of the publisher: purge the old one's entries and start over from seq 0.

        The live seqs start afresh too: when a replay found the restart, the new run's
        batches it applied may still wait on the SUB socket, and their seqs, lower than the
        old run's last, are no second restart (the first live one is judged as after
        connecting: an applied seq is a duplicate unless published after the last applied).
        """
        status.count(self.client, stream.spec.id, "restarts")
        status.started(self.client, stream.spec.id)
        log.info("ingest %s: publisher restarted", stream.spec.id)
        stream.pending = []
        self.purge(stream)
        status.reset_last_seq(self.client, stream.spec.id)
        stream.last_applied = -1
        stream.last_live = -1

    def purge(self, stream: _Stream) -> None:
        self.flush(stream)
        self.settle()
        self.applier.purge_stream(stream.spec.id.pod, stream.spec.id.name)
        status.count(self.client, stream.spec.id, "purges")
