"""Streams as the index knows them: one (engine pod, data-parallel rank) publisher of KV events,
or that rank's batches pushed over HTTP (compatibility.md 4.1)."""

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

    @property
    def label(self) -> str:
        """The stream as pages name it."""
        return f"pushed rank {self.rank}" if self.pushed else f"rank {self.rank}"

    def __str__(self) -> str:
        return f"{self.pod}|{self.name}"


@dataclass(frozen=True, slots=True)
class IndexedStream:
    """What the writer needs of a stream: its id, the model its pod serves and the engine kind
    (which names kthena's mapping keys). The reader's `StreamSpec` adds the transport."""

    id: StreamId
    model: str
    kind: str


def push_stream(pod: str, rank: int | None) -> StreamId:
    """The stream of rank r's pushed batches (rank 0 for a batch that names none)."""
    return StreamId(pod, rank or 0, pushed=True)


def push_streams(pod: str, dp_size: int) -> list[StreamId]:
    return [push_stream(pod, rank) for rank in range(dp_size)]
