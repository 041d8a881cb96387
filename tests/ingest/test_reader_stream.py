"""A reader consumes one engine's stream: live batches, replay, gaps, restarts, bad input."""

from dataclasses import replace

import zmq

from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding, all_blocks_cleared
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.ingest.streams import StreamSpec
from tests.ingest.blocks import key, removed, stored
from tests.ingest.conftest import spec_for
from tests.waiting import patient, wait_until

POD = "vllm-0.default"
STREAM = StreamId(POD, 0)


def _medium(redis_client, n: int) -> str | None:
    value = redis_client.hget(key(n), POD)
    return value.partition("|")[2] if value else None


def _applied(redis_client, seq: int) -> bool:
    return status.last_seq(redis_client, STREAM) >= seq


def _caught_up(publisher, redis_client) -> None:
    """The reader has connected and replayed what the engine had: live batches follow."""
    wait_until(lambda: status.read_statuses(redis_client, [STREAM])[0].connected, what="connect")
    publisher.wait_for_subscribers()


def _stopped(loop, redis_client, publisher) -> None:
    """Stop `loop` and wait until it has let go of the stream: a loop still reading would see
    what the test does next (a restart, say) as well as the loop that takes over. And until
    `publisher` has seen its subscription go: otherwise the next loop's `_caught_up` could
    count the old one, and batches published before the new subscription would be lost."""
    loop.stop()
    wait_until(
        lambda: status.read_statuses(redis_client, [STREAM])[0].status.get("connected") == "0",
        what="stop",
    )
    publisher.wait_for_no_subscribers(patient(10))


def test_it_applies_live_batches(publisher, start_loop, redis_client) -> None:
    start_loop([spec_for(publisher)])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(1, 2)])
    publisher.publish([removed(1)])
    seq = publisher.publish([stored(3, medium="CPU")])
    wait_until(lambda: _applied(redis_client, seq), what="seq applied")
    assert redis_client.hget(key(1), POD) is None
    assert _medium(redis_client, 2) == "GPU"
    assert _medium(redis_client, 3) == "CPU"
    assert status.read_statuses(redis_client, [STREAM])[0].connected


def test_it_replays_what_was_published_before_it_started(publisher, start_loop, redis_client):
    for n in range(5):
        publisher.publish([stored(n)])
    start_loop([spec_for(publisher)])
    wait_until(lambda: _applied(redis_client, 4), what="replayed seqs applied")
    assert all(_medium(redis_client, n) == "GPU" for n in range(5))


def test_a_gap_is_repaired_through_replay(publisher, start_loop, redis_client) -> None:
    start_loop([spec_for(publisher)])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(1)])
    publisher.drop(2)
    publisher.publish([stored(2)])
    publisher.publish([stored(3)])
    seq = publisher.publish([stored(4)])
    wait_until(lambda: _applied(redis_client, seq), what="gap repaired")
    assert all(_medium(redis_client, n) == "GPU" for n in (1, 2, 3, 4))
    counters = status.read_statuses(redis_client, [STREAM])[0].status
    assert int(counters["gaps"]) >= 1
    assert int(counters.get("batches_lost", 0)) == 0


def test_a_publisher_restart_purges_its_stale_entries(publisher, start_loop, redis_client):
    start_loop([spec_for(publisher)])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(1)])
    seq = publisher.publish([stored(2)])
    wait_until(lambda: _applied(redis_client, seq), what="first run applied")
    publisher.restart()
    publisher.publish([stored(3)])
    wait_until(lambda: _medium(redis_client, 3) == "GPU", what="new run applied")
    assert redis_client.hget(key(1), POD) is None
    assert redis_client.hget(key(2), POD) is None
    assert int(status.read_statuses(redis_client, [STREAM])[0].status["restarts"]) == 1


def test_a_restart_while_nobody_read_is_detected_on_takeover(publisher, start_loop, redis_client):
    publisher.publish([stored(1)])
    publisher.publish([stored(2)])
    loop = start_loop([spec_for(publisher)])
    wait_until(lambda: _applied(redis_client, 1), what="first run applied")
    _stopped(loop, redis_client, publisher)
    publisher.restart()
    publisher.publish([stored(3)])
    start_loop([spec_for(publisher)])
    wait_until(lambda: _medium(redis_client, 3) == "GPU", what="new run applied")
    assert redis_client.hget(key(1), POD) is None
    assert int(status.read_statuses(redis_client, [STREAM])[0].status["restarts"]) == 1


def test_without_replay_a_restart_while_nobody_read_is_told_by_publish_times(
    publisher, start_loop, redis_client
):
    """The new run's seqs are at or below the last applied one: only the engine's publish
    times tell them from duplicates."""
    spec = replace(spec_for(publisher), replay_endpoint=None)
    loop = start_loop([spec])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(1)])
    seq = publisher.publish([stored(2)])
    wait_until(lambda: _applied(redis_client, seq), what="first run applied")
    _stopped(loop, redis_client, publisher)
    publisher.restart()
    publisher.publish([stored(3)])  # seq 0, published while nobody reads: lost
    start_loop([spec])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(4)])  # seq 1, the last applied seq
    wait_until(lambda: _medium(redis_client, 4) == "GPU", what="new run applied")
    assert redis_client.hget(key(1), POD) is None
    counters = status.read_statuses(redis_client, [STREAM])[0].status
    assert (counters["restarts"], counters["batches_lost"]) == ("1", "1")


def test_without_replay_an_applied_seq_published_no_later_stays_a_duplicate(
    publisher, start_loop, redis_client
):
    spec = replace(spec_for(publisher), replay_endpoint=None)
    loop = start_loop([spec])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(1)], ts=100.0)
    seq = publisher.publish([stored(2)], ts=200.0)
    wait_until(lambda: _applied(redis_client, seq), what="batches applied")
    _stopped(loop, redis_client, publisher)
    publisher.restart()  # only to send seq 1 again, as a late duplicate
    publisher.publish([stored(8)], ts=200.0)  # seq 0, nobody reads
    start_loop([spec])
    _caught_up(publisher, redis_client)
    publisher.publish([stored(9)], ts=200.0)  # seq 1 again, published no later
    publisher.publish([stored(3)], ts=300.0)  # seq 2
    wait_until(lambda: _medium(redis_client, 3) == "GPU", what="seq 2 applied")
    assert _medium(redis_client, 1) == "GPU" and _medium(redis_client, 9) is None
    assert "restarts" not in status.read_statuses(redis_client, [STREAM])[0].status


def test_a_gap_beyond_the_replay_buffer_is_counted_and_purged(start_loop, redis_client) -> None:
    with Publisher(encoding=Encoding.VLLM_ARRAY, buffer_steps=2) as publisher:
        start_loop([spec_for(publisher)])
        _caught_up(publisher, redis_client)
        first = publisher.publish([stored(1)])
        wait_until(lambda: _applied(redis_client, first), what="first batch applied")
        publisher.drop(4)
        for n in range(2, 6):
            publisher.publish([stored(n)])
        seq = publisher.publish([stored(9)])
        wait_until(lambda: _applied(redis_client, seq), what="stream resumed")
        counters = status.read_statuses(redis_client, [STREAM])[0].status
    assert int(counters["batches_lost"]) == 3  # seqs 1-3; the buffer still held 4 and 5
    assert int(counters["purges"]) == 1
    assert redis_client.hget(key(1), POD) is None  # purged: the index could not be trusted
    assert _medium(redis_client, 5) == "GPU"
    assert _medium(redis_client, 9) == "GPU"


def test_an_undecodable_payload_is_counted_and_the_stream_goes_on(
    publisher, start_loop, redis_client
) -> None:
    start_loop([spec_for(publisher)])
    _caught_up(publisher, redis_client)
    publisher.publish_payload(b"\xc1 not msgpack")
    seq = publisher.publish([stored(1), all_blocks_cleared(publisher.encoding), stored(2)])
    wait_until(lambda: _applied(redis_client, seq), what="next batch applied")
    assert _medium(redis_client, 2) == "GPU"
    # The clear's retired blocks are drained once its reply is read, just after.
    wait_until(lambda: redis_client.hget(key(1), POD) is None, what="cleared block drained")
    assert int(status.read_statuses(redis_client, [STREAM])[0].status["skipped_undecodable"]) == 1


def test_a_message_with_wrong_frames_is_counted(start_loop, redis_client) -> None:
    context = zmq.Context.instance()
    pub = context.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind("tcp://127.0.0.1:*")
    try:
        endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
        spec = StreamSpec(STREAM, "m", "vllm", endpoint, None, b"", 16)
        start_loop([spec])
        wait_until(lambda: pub.poll(100) and pub.recv(), what="a subscription")
        pub.send_multipart([b"", b"only two frames"])
        wait_until(
            lambda: status.read_statuses(redis_client, [STREAM])[0].status.get("bad_frames") == "1",
            what="bad frames counted",
        )
    finally:
        pub.close()
