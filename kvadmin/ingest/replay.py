"""Asking an engine's replay socket for buffered batches (compatibility.md 4.1).

A DEALER sends `[b"", start_seq]`; the engine answers every buffered batch with seq >= start
as `[b"", seq, payload]` (vLLM <= 0.25, older SGLang) or `[b"", topic, seq, payload]` (newer),
then an end marker whose seq frame is ff*8. A REQ socket would only get the first reply.
"""

from dataclasses import dataclass

import zmq

END_MARKER = b"\xff" * 8


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
        socket.send_multipart([b"", start.to_bytes(8, "big")])
        batches = []
        while True:
            try:
                frames = socket.recv_multipart()
            except zmq.Again:
                raise ReplayFailed(f"{endpoint}: no end marker within {timeout}s") from None
            if len(frames) not in (3, 4) or frames[0] != b"" or len(frames[-2]) != 8:
                raise ReplayFailed(f"{endpoint}: unexpected replay frames ({len(frames)})")
            seq_frame, payload = frames[-2], frames[-1]
            if seq_frame == END_MARKER:
                return batches
            batches.append(Replayed(int.from_bytes(seq_frame, "big"), payload))
    finally:
        socket.close()
