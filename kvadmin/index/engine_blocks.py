"""A stream's engine blocks: which engine hashes it holds, as which standardized hash, in which
media (writer.py's layout). The index scripts write them (lua/includes/engine_blocks.lua);
everything in Python that reads them reads them here: the search box's engine-hash lookup, the
block page's engine-hash scan, the tests and the benchmarks.

One generation of a stream (the stream status's `generation`: the live one) is spread over
`keys.ENGINE_BLOCK_BUCKETS` hashes by the engine hash's last digits (`slot`), which Redis keeps as
compact listpacks where one hash per stream would be a hashtable (docs/capacity.md section 1).
A value is the block's std and media (`Entry`), short for a block held in GPU or CPU alone.
"""

from collections.abc import Sequence
from typing import NamedTuple

import redis

from scoring import keys

ZERO, NINE = ord("0"), ord("9")
WHOLE = ":"
"""Marks a field holding its engine hash whole (no engine hash text holds a ':')."""


def slot(engine_hash: str) -> tuple[int, str]:
    """The bucket and the field of an engine hash's text, by the scripts' rule
    (lua/includes/engine_blocks.lua): one that is longer than three characters and ends in
    three decimal digits lives in the bucket they name, under the rest of its text (17 digits
    of a 20-digit hash fit Redis's integer encoding); any other lives whole after a ':', in
    the bucket of its last three bytes read as digits."""
    text = engine_hash.encode()
    tail = text[-3:].rjust(3, b"0")
    number = tail[0] * 100 + tail[1] * 10 + tail[2] - ZERO * 111
    if len(text) > 3 and all(ZERO <= c <= NINE for c in tail):
        return number, engine_hash[:-3]
    return number % keys.ENGINE_BLOCK_BUCKETS, WHOLE + engine_hash


def engine_hash(field: str, bucket: int) -> str:
    """The engine hash text of a field of a bucket (the inverse of `slot`)."""
    if field.startswith(WHOLE):
        return field.removeprefix(WHOLE)
    return f"{field}{bucket:03d}"


SHORT = {"GPU": "", "CPU": "-"}
"""The media whose blocks held in them alone have a value of the std alone, after this prefix:
an integer, which a listpack keeps in 8 bytes where "{std}|CPU" takes 23 (vLLM's two media; on
its CPU offload half a stream's entries are in CPU alone). Any other media are
"{std}|{m1},{m2}", the form builds before wrote every value in (lua/includes/media_list.lua's
parse and entry, which read and write both)."""


class Entry(NamedTuple):
    """One engine block of a stream: its standardized hash and the media the stream holds it
    in, the primary tier (stored with tokens) first."""

    std: str
    media: tuple[str, ...]

    @classmethod
    def parse(cls, value: str) -> "Entry":
        """The entry of a stored value, in either form."""
        std, bar, media = value.partition("|")
        if bar:
            return cls(std, tuple(media.split(",")))
        if std.startswith("-"):
            return cls(std[1:], ("CPU",))
        return cls(std, ("GPU",))

    @property
    def value(self) -> str:
        """The value as the scripts write it."""
        if len(self.media) == 1 and self.media[0] in SHORT:
            return SHORT[self.media[0]] + self.std
        return self.text

    @property
    def text(self) -> str:
        """The long form, "{std}|{m1},{m2}", whatever the stored one."""
        return f"{self.std}|{','.join(self.media)}"


def is_legacy_layout(error: redis.ResponseError) -> bool:
    """Whether an index command refused a pod whose engine blocks are still as builds before
    issue 35 kept them (`Applier.upgrade_pod` upgrades it)."""
    return str(error).startswith("LEGACY_LAYOUT")


def generations(client: redis.Redis, streams: Sequence[tuple[str, str]]) -> list[int]:
    """The live generation of each (pod, stream name), in one round trip."""
    pipe = client.pipeline(transaction=False)
    for pod, name in streams:
        pipe.hget(keys.stream_status_key(pod, name), "generation")
    return [int(generation or 0) for generation in pipe.execute()]


def lookup(client: redis.Redis, asked: Sequence[tuple[str, str, str]]) -> list[Entry | None]:
    """The engine block of each (pod, stream name, engine hash text), None where the stream
    does not hold it: two round trips (the generations, the entries)."""
    streams = sorted({(pod, name) for pod, name, _ in asked})
    live = dict(zip(streams, generations(client, streams), strict=True))
    pipe = client.pipeline(transaction=False)
    for pod, name, text in asked:
        bucket, field = slot(text)
        pipe.hget(keys.engine_blocks_key(pod, name, live[pod, name], bucket), field)
    return [None if value is None else Entry.parse(value) for value in pipe.execute()]


def scan(
    client: redis.Redis, pod: str, name: str, bucket: int, buckets: int
) -> tuple[int, dict[str, Entry]]:
    """The entries of `buckets` buckets of the stream's live generation from `bucket` on, in
    two round trips, and the bucket to go on at (0 at the end)."""
    (generation,) = generations(client, [(pod, name)])
    end = min(bucket + buckets, keys.ENGINE_BLOCK_BUCKETS)
    pipe = client.pipeline(transaction=False)
    for at in range(bucket, end):
        pipe.hgetall(keys.engine_blocks_key(pod, name, generation, at))
    entries: dict[str, Entry] = {}
    for at, part in zip(range(bucket, end), pipe.execute(), strict=True):
        for field, value in part.items():
            entries[engine_hash(field, at)] = Entry.parse(value)
    return (end if end < keys.ENGINE_BLOCK_BUCKETS else 0), entries


def read_stream(client: redis.Redis, pod: str, name: str) -> dict[str, Entry]:
    """Every engine block of the stream's live generation by engine hash."""
    _, entries = scan(client, pod, name, 0, keys.ENGINE_BLOCK_BUCKETS)
    return entries
