"""Asking an engine's replay socket for buffered batches (compatibility.md 4.1).

A DEALER sends `[b"", start_seq]`; the engine answers every buffered batch with seq >= start,
then an end marker (the frames as `decode.split_replay_frames` reads them). A REQ socket would
only get the first reply.
"""

from dataclasses import dataclass

import zmq

from kvadmin.ingest.decode import SEQ_BYTES, BadFrames, split_replay_frames


class ReplayFailed(Exception):
    """The replay socket did not answer completely in time."""


@dataclass(frozen=True, slots=True)
class Replayed:
    seq: int
    payload: bytes


def request_replay(
    context: zmq.Context, endpoint: str, start: int, timeout: float = 5.0
) -> list[Replayed]:
    """Every buffered batch from `start` on, in order. The first seq may be later than
    `start` when the engine's buffer no longer reaches back that far."""
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    socket.setsockopt(zmq.RCVHWM, 0)
    try:
        socket.connect(endpoint)
        socket.send_multipart([b"", start.to_bytes(SEQ_BYTES, "big")])
        batches = []
        while True:
            try:
                frames = socket.recv_multipart()
            except zmq.Again:
                raise ReplayFailed(f"{endpoint}: no end marker within {timeout}s") from None
            try:
                split = split_replay_frames(frames)
            except BadFrames as error:
                raise ReplayFailed(f"{endpoint}: unexpected replay frames: {error}") from None
            if split is None:
                return batches
            batches.append(Replayed(split[1], split[2]))
    finally:
        socket.close()
