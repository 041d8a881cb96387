"""The emulated engine publisher over real ZMQ sockets on 127.0.0.1: live stream, replay in both
frame layouts, and the fault switches the ingestion tests rely on (compatibility.md 4.1)."""

import time
from collections.abc import Callable, Iterator

import pytest
import zmq

from kvadmin.fleet.publisher import Publisher, offset_endpoint, open_ranks
from kvadmin.fleet.wire import Encoding, block_removed
from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored
from kvadmin.ingest.decode import (
    END_OF_REPLAY,
    decode_batch,
    split_frames,
    split_replay_frames,
)
from tests.fleet.conftest import free_base_port

TIMEOUT_MS = 5000
STORE = BlockStored(("18446744073709551615",), tuple(range(16)), 16, "GPU")

Subscribe = Callable[[Publisher], zmq.Socket]


@pytest.fixture
def context() -> zmq.Context:
    """The process's ZMQ context, for the test's own sockets."""
    return zmq.Context.instance()


@pytest.fixture
def publisher() -> Iterator[Publisher]:
    """A vLLM publisher on free ports, with a replay socket."""
    with Publisher(topic=b"kv-events") as publisher:
        yield publisher


@pytest.fixture
def subscribe(context: zmq.Context) -> Iterator[Subscribe]:
    """Connect a SUB to a publisher and wait until its subscription has arrived there, so no
    batch is lost to ZMQ's slow-joiner window."""
    sockets: list[zmq.Socket] = []
    per_publisher: dict[int, int] = {}

    def connect(publisher: Publisher) -> zmq.Socket:
        sub = context.socket(zmq.SUB)
        sockets.append(sub)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
        sub.setsockopt(zmq.SUBSCRIBE, publisher.topic)
        sub.connect(publisher.endpoint)
        per_publisher[id(publisher)] = per_publisher.get(id(publisher), 0) + 1
        publisher.wait_for_subscribers(per_publisher[id(publisher)])
        return sub

    yield connect
    for sub in sockets:
        sub.close()


def replay(context: zmq.Context, publisher: Publisher, start: int) -> list[list[bytes]]:
    """Every message a DEALER gets for `[b"", start]`, end marker included."""
    assert publisher.replay_endpoint is not None
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    try:
        dealer.connect(publisher.replay_endpoint)
        dealer.send_multipart([b"", start.to_bytes(8, "big")])
        messages = [dealer.recv_multipart()]
        while messages[-1][-2] != END_OF_REPLAY:
            messages.append(dealer.recv_multipart())
        return messages
    finally:
        dealer.close()


def replayed_seqs(context: zmq.Context, publisher: Publisher, start: int) -> list[int]:
    *batches, end = replay(context, publisher, start)
    assert split_replay_frames(end) is None
    return [message[1] for message in map(split_replay_frames, batches) if message]


def received_seqs(sub: zmq.Socket, count: int) -> list[int]:
    return [split_frames(sub.recv_multipart())[1] for _ in range(count)]


def test_a_subscriber_receives_seq_numbered_batches_that_decode_back(
    publisher: Publisher, subscribe: Subscribe
) -> None:
    sub = subscribe(publisher)
    publisher.publish([STORE], ts=10.0)
    publisher.publish([BlockRemoved(("-5",), "CPU"), AllBlocksCleared()], ts=11.0)

    first, second = sub.recv_multipart(), sub.recv_multipart()
    assert first[:2] == [b"kv-events", b"\x00" * 8]
    assert second[1] == b"\x00" * 7 + b"\x01"
    topic, seq, payload = split_frames(second)
    batch = decode_batch(payload)
    assert (topic, seq, batch.ts, batch.rank) == (b"kv-events", 1, 11.0, 0)
    assert batch.events == [BlockRemoved(("-5",), "CPU"), AllBlocksCleared()]
    assert decode_batch(split_frames(first)[2]).events == [STORE]
    assert publisher.next_seq == 2


@pytest.mark.parametrize("encoding", list(Encoding))
def test_every_encoding_publishes_decodable_batches(
    encoding: Encoding, subscribe: Subscribe
) -> None:
    with Publisher(encoding=encoding, replay_endpoint=None) as publisher:
        sub = subscribe(publisher)
        publisher.publish([block_removed(encoding, [2**63, -1])])
        events = decode_batch(split_frames(sub.recv_multipart())[2]).events
        assert [e.block_hashes for e in events] == [(str(2**63), "-1")]


@pytest.mark.parametrize(
    ("topic_frame", "frame_count"),
    [(False, 3), (True, 4)],
    ids=["seq-payload", "topic-seq-payload"],
)
def test_replay_answers_every_batch_from_start_then_the_end_marker(
    context: zmq.Context, topic_frame: bool, frame_count: int
) -> None:
    with Publisher(topic=b"kv-events", replay_topic_frame=topic_frame) as publisher:
        for n in range(5):
            publisher.publish([BlockRemoved((str(n),), "GPU")])

        *batches, end = replay(context, publisher, 2)

    assert [len(message) for message in batches] == [frame_count] * 3
    decoded = [split_replay_frames(message) for message in batches]
    assert [(m[1], decode_batch(m[2]).events[0].block_hashes) for m in decoded if m] == [
        (2, ("2",)),
        (3, ("3",)),
        (4, ("4",)),
    ]
    assert {m[0] for m in decoded if m} == {b"kv-events" if topic_frame else None}
    if topic_frame:
        assert end == [b"", b"", END_OF_REPLAY, b""]
    else:
        assert end == [b"", END_OF_REPLAY, b""]


def test_the_replay_layout_follows_the_engine_generation(context: zmq.Context) -> None:
    for encoding, frame_count in [(Encoding.VLLM_ARRAY, 3), (Encoding.VLLM_MAP, 4)]:
        with Publisher(encoding=encoding) as publisher:
            publisher.publish([AllBlocksCleared()])
            assert len(replay(context, publisher, 0)[0]) == frame_count


def test_replay_from_before_the_buffer_starts_at_the_oldest_buffered_batch(
    context: zmq.Context,
) -> None:
    with Publisher(buffer_steps=3) as publisher:
        for _ in range(7):
            publisher.publish([AllBlocksCleared()])
        assert replayed_seqs(context, publisher, 0) == [4, 5, 6]
        assert replayed_seqs(context, publisher, 5) == [5, 6]
        assert replayed_seqs(context, publisher, 7) == []


def test_a_malformed_replay_request_is_ignored_like_engines_do(
    context: zmq.Context, publisher: Publisher
) -> None:
    publisher.publish([AllBlocksCleared()])
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    try:
        assert publisher.replay_endpoint is not None
        dealer.connect(publisher.replay_endpoint)
        dealer.send_multipart([b"", b"\x00" * 8, b"surplus"])
        dealer.send_multipart([b"", b"\x00" * 8])
        first = dealer.recv_multipart()
        assert split_replay_frames(first) is not None and first[-2] == b"\x00" * 8
        assert dealer.recv_multipart()[-2] == END_OF_REPLAY
    finally:
        dealer.close()
    assert publisher.replays_served == 1


def test_restart_resets_seq_and_empties_the_replay_buffer(
    context: zmq.Context, publisher: Publisher, subscribe: Subscribe
) -> None:
    sub = subscribe(publisher)
    for _ in range(3):
        publisher.publish([STORE])
    publisher.restart()
    publisher.publish([AllBlocksCleared()])

    assert received_seqs(sub, 4) == [0, 1, 2, 0]
    assert replayed_seqs(context, publisher, 0) == [0]


def test_drop_makes_a_gap_on_pub_that_replay_fills(
    context: zmq.Context, publisher: Publisher, subscribe: Subscribe
) -> None:
    sub = subscribe(publisher)
    publisher.publish([STORE])
    publisher.drop(2)
    for _ in range(3):
        publisher.publish([STORE])
    publisher.drop_seqs(range(5, 7))
    for _ in range(4):
        publisher.publish([STORE])

    assert received_seqs(sub, 4) == [0, 3, 4, 7]
    assert replayed_seqs(context, publisher, 1) == [1, 2, 3, 4, 5, 6, 7]


def test_data_parallel_ranks_publish_on_offset_ports_with_their_own_seq(
    context: zmq.Context, subscribe: Subscribe
) -> None:
    pub_base, replay_base = free_base_port(1), free_base_port(1)
    ranks = open_ranks(
        2,
        f"tcp://127.0.0.1:{pub_base}",
        f"tcp://127.0.0.1:{replay_base}",
        encoding=Encoding.SGLANG_ARRAY,
    )
    try:
        assert [p.endpoint for p in ranks] == [
            f"tcp://127.0.0.1:{pub_base}",
            f"tcp://127.0.0.1:{pub_base + 1}",
        ]
        assert [p.replay_endpoint for p in ranks] == [
            f"tcp://127.0.0.1:{replay_base}",
            f"tcp://127.0.0.1:{replay_base + 1}",
        ]
        subs = [subscribe(p) for p in ranks]
        ranks[1].publish([STORE])
        ranks[1].publish([STORE])
        ranks[0].publish([STORE])

        rank_zero, rank_one = (split_frames(sub.recv_multipart()) for sub in subs)
        assert (rank_zero[1], decode_batch(rank_zero[2]).rank) == (0, 0)
        assert (rank_one[1], decode_batch(rank_one[2]).rank) == (0, 1)
        assert received_seqs(subs[1], 1) == [1]
        assert replayed_seqs(context, ranks[1], 0) == [0, 1]
        assert replayed_seqs(context, ranks[0], 0) == [0]
    finally:
        for publisher in ranks:
            publisher.close()


def test_open_ranks_closes_what_it_opened_when_a_rank_cannot_bind() -> None:
    base = free_base_port(1)
    with Publisher(f"tcp://127.0.0.1:{base + 1}", None):
        with pytest.raises(zmq.ZMQError):
            open_ranks(2, f"tcp://127.0.0.1:{base}")
        with Publisher(f"tcp://127.0.0.1:{base}", None) as rank_zero_again:
            assert rank_zero_again.endpoint.endswith(f":{base}")


def test_offset_endpoint_moves_the_port_by_the_rank() -> None:
    assert offset_endpoint("tcp://*:5557", 0) == "tcp://*:5557"
    assert offset_endpoint("tcp://*:5557", 3) == "tcp://*:5560"
    assert offset_endpoint("tcp://127.0.0.1:0", 2) == "tcp://127.0.0.1:0"
    assert offset_endpoint("inproc://kv", 1) == "inproc://kv_dp1"
    with pytest.raises(ValueError, match="rank offset"):
        offset_endpoint("ipc:///tmp/kv", 1)


def test_slow_mode_spaces_out_published_batches(publisher: Publisher) -> None:
    publisher.slow(publish_delay=0.05)
    started = time.monotonic()
    for _ in range(4):
        publisher.publish([STORE])
    assert time.monotonic() - started >= 0.2


def test_slow_replay_still_answers_everything(context: zmq.Context, publisher: Publisher) -> None:
    for _ in range(3):
        publisher.publish([STORE])
    publisher.slow(replay_delay=0.02)
    started = time.monotonic()
    assert replayed_seqs(context, publisher, 0) == [0, 1, 2]
    assert time.monotonic() - started >= 0.06


def test_waiting_for_a_subscriber_that_never_comes_times_out(publisher: Publisher) -> None:
    with pytest.raises(TimeoutError, match=r"0 subscriber\(s\), not 1 subscriber"):
        publisher.wait_for_subscribers(timeout=0.05)


def test_subscribers_of_another_topic_are_not_counted(
    context: zmq.Context, publisher: Publisher
) -> None:
    other = context.socket(zmq.SUB)
    other.setsockopt(zmq.LINGER, 0)
    other.setsockopt(zmq.SUBSCRIBE, b"other-topic")
    other.connect(publisher.endpoint)
    try:
        with pytest.raises(TimeoutError):
            publisher.wait_for_subscribers(timeout=0.2)
    finally:
        other.close()


def test_close_releases_both_ports_and_is_idempotent() -> None:
    publisher = Publisher()
    endpoints = [publisher.endpoint, publisher.replay_endpoint]
    publisher.close()
    publisher.close()
    with pytest.raises(RuntimeError, match="closed"):
        publisher.publish([STORE])
    assert endpoints[1] is not None
    with Publisher(endpoints[0], endpoints[1]) as again:
        assert [again.endpoint, again.replay_endpoint] == endpoints


def test_a_publisher_without_replay_endpoint_has_no_replay_socket() -> None:
    with Publisher(replay_endpoint=None) as publisher:
        assert publisher.replay_endpoint is None
        assert publisher.publish([STORE]) == 0
