"""What a reader consumes of a stream, and what to do with each sequence number it sends
(compatibility.md 4.1)."""

import enum
from dataclasses import dataclass

from kvadmin.index.streams import IndexedStream


@dataclass(frozen=True, slots=True)
class StreamSpec(IndexedStream):
    """Everything a reader needs to consume one stream, taken from the engine registry."""

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
