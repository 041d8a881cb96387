"""Streams: one (engine pod, data-parallel rank) publisher of KV events, and what to do
with each sequence number it sends (compatibility.md 4.1)."""

import enum
from dataclasses import dataclass

from scoring.keys import parse_stream_name, stream_name


@dataclass(frozen=True, slots=True, order=True)
class StreamId:
    """A rank's ZMQ stream, or with `pushed` its batches pushed over HTTP: a stream of its
    own, in a key space of its own (`scoring.keys.stream_name`)."""

    pod: str
    rank: int
    pushed: bool = False

    def __post_init__(self) -> None:
        stream_name(self.rank, pushed=self.pushed)  # refuse a rank no stream can have

    @property
    def name(self) -> str:
        """The `{stream}` part of the stream's Redis keys."""
        return stream_name(self.rank, pushed=self.pushed)

    @classmethod
    def from_name(cls, pod: str, name: str) -> "StreamId | None":
        """The stream a `{stream}` key part names; None for names of no current stream."""
        parsed = parse_stream_name(name)
        return None if parsed is None else cls(pod, *parsed)

    def __str__(self) -> str:
        return f"{self.pod}|{self.name}"


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """Everything a reader needs to consume one stream, taken from the engine registry."""

    id: StreamId
    model: str
    kind: str
    events_endpoint: str
    replay_endpoint: str | None
    topic: bytes
    block_size: int


class SeqAction(enum.Enum):
    APPLY = "apply"
    DUPLICATE = "duplicate"
    GAP = "gap"
    RESTART = "restart"


def classify_seq(seq: int, last_applied: int, last_live: int) -> SeqAction:
    """Decide what a live message's seq means.

    `last_applied` is the last seq applied to the index (-1 for none); `last_live` the last seq
    this connection's SUB socket delivered (-1 since connecting). A PUB socket delivers one
    publisher's messages in order, so a live seq going backwards is a publisher restart; an
    old seq that did not go backwards was already applied through replay. (The first seq
    since connecting has nothing to go back from: the reader tells a restart there by the
    batch's publish time.)
    """
    if seq < last_live:
        return SeqAction.RESTART
    if seq <= last_applied:
        return SeqAction.DUPLICATE
    if seq == last_applied + 1:
        return SeqAction.APPLY
    return SeqAction.GAP
