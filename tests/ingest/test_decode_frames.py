"""ZMQ messages of the stream: PUB `[topic, seq, payload]` and the two replay layouts."""

import msgspec
import pytest

from kvadmin.index.events import AllBlocksCleared, EventBatch
from kvadmin.ingest.decode import (
    END_OF_REPLAY,
    BadFrames,
    UndecodableBatch,
    decode_batch,
    split_frames,
    split_replay_frames,
)

PAYLOAD = msgspec.msgpack.encode([1.5, [["AllBlocksCleared"]], 0])
BATCH = EventBatch(ts=1.5, events=[AllBlocksCleared()], rank=0)


def seq(value: int) -> bytes:
    return value.to_bytes(8, "big")


def test_a_published_message_gives_topic_seq_and_batch() -> None:
    topic, number, payload = split_frames([b"kv-events", seq(41), PAYLOAD])
    assert (topic, number, decode_batch(payload)) == (b"kv-events", 41, BATCH)


def test_seq_is_unsigned_big_endian_over_8_bytes() -> None:
    assert split_frames([b"", seq(2**64 - 2), PAYLOAD])[1] == 2**64 - 2
    assert split_frames([b"", b"\x00" * 7 + b"\x01", PAYLOAD])[1] == 1


@pytest.mark.parametrize("count", [0, 1, 2, 4, 5])
def test_a_published_message_needs_exactly_3_frames(count: int) -> None:
    frames = [b"", seq(0), PAYLOAD, b"", b""][:count]
    with pytest.raises(BadFrames, match=f"not {count} frames"):
        split_frames(frames)


@pytest.mark.parametrize("size", [0, 1, 7, 9, 16])
def test_a_seq_frame_must_have_8_bytes(size: int) -> None:
    with pytest.raises(BadFrames, match=f"8 bytes, not {size}"):
        split_frames([b"", b"\x00" * size, PAYLOAD])


def test_a_bad_payload_in_good_frames_is_undecodable() -> None:
    with pytest.raises(UndecodableBatch):
        decode_batch(split_frames([b"", seq(0), b"\xc1"])[2])


def test_split_frames_reads_the_seq_of_a_payload_it_leaves_undecoded() -> None:
    """So a consumer still knows which seq was the undecodable one."""
    assert split_frames([b"kv", seq(9), b"\xc1"]) == (b"kv", 9, b"\xc1")
    with pytest.raises(BadFrames):
        split_frames([b"kv", seq(9)])


def test_bad_frames_is_a_value_error() -> None:
    assert issubclass(BadFrames, ValueError)


def test_replay_without_topic_frame() -> None:
    """vLLM <= 0.25 and older SGLang: `[b"", seq, payload]`."""
    assert split_replay_frames([b"", seq(7), PAYLOAD]) == (None, 7, PAYLOAD)


def test_replay_with_topic_frame() -> None:
    """vLLM >= 0.26 and SGLang >= 0.5.23: `[b"", topic, seq, payload]`."""
    assert split_replay_frames([b"", b"kv", seq(7), PAYLOAD]) == (b"kv", 7, PAYLOAD)


@pytest.mark.parametrize(
    "frames",
    [[b"", END_OF_REPLAY, b""], [b"", b"", END_OF_REPLAY, b""], [b"", b"kv", END_OF_REPLAY, b""]],
    ids=["no-topic", "empty-topic", "topic"],
)
def test_the_end_marker_of_either_layout_is_none(frames: list[bytes]) -> None:
    assert END_OF_REPLAY == b"\xff" * 8
    assert split_replay_frames(frames) is None


@pytest.mark.parametrize("count", [1, 2, 5])
def test_a_replay_message_has_3_or_4_frames(count: int) -> None:
    with pytest.raises(BadFrames, match=f"not {count}"):
        split_replay_frames([b"", b"", seq(0), PAYLOAD, b""][:count])


def test_a_replay_message_starts_with_an_empty_delimiter() -> None:
    with pytest.raises(BadFrames, match="empty delimiter"):
        split_replay_frames([b"x", seq(0), PAYLOAD])


def test_a_replay_seq_frame_must_have_8_bytes() -> None:
    with pytest.raises(BadFrames, match="8 bytes"):
        split_replay_frames([b"", b"kv", b"\x01", PAYLOAD])
