"""A model's cached blocks, newest first, from the residency ZSETs the ingestion maintains.

Nothing here scans the keyspace: the model's pods come from `kvadmin:pods`, their media from
their media SETs, and the blocks from the per-pod, per-medium residency ZSETs
(`kvadmin:res:{pod}|{medium}`, std -> last store time in unix microseconds),
read a page at a time.

The listing order is (last store time desc, std desc), or its reverse oldest first: Redis
orders members of equal score by their bytes, so every ZSET is already in listing order and a
page is a k-way merge of their heads. A block held by several pods or in several media is
listed once, at its newest position among the ZSETs the filters select (oldest first too: by
the time it was last stored anywhere). A cursor is a position (time, std), so pages stay put
while blocks are stored and removed around them.

One page:
1. Each ZSET that has no unread entries left gets its next entries after its last one
   (after the cursor at first), one script call per ZSET, all in one pipeline
   (`after_cursor.lua` finds the start by rank, so equal scores are exact and cheap). The
   first round reads a share of a page from each ZSET, later rounds `limit + 1`.
2. Entries are taken in listing order only down to the "horizon", the last-read position
   listed first among the ZSETs that may hold more: past it a ZSET not yet read further could
   come first.
3. One pipelined ZMSCORE per ZSET gives each taken std's newest position among all of them;
   a std whose newest position is elsewhere is listed there (an earlier page newest first, a
   later one oldest first), so it goes here. Each std is kept once. (The first page newest
   first needs no check: there the first position taken of a std is its newest.)
4. Repeat until the page has `limit + 1` blocks, the ZSETs are exhausted, or `MAX_ROUNDS`
   rounds passed. The last case bounds the work of one request (blocks another ZSET re-stored
   more recently can be skipped in bulk): the page is then short and its cursor is the last
   position examined, so scrolling on continues from there.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from kvadmin.conf import value_format
from kvadmin.index.value_format import held_media
from kvadmin.weights.active import active_weights
from scoring import keys
from scoring.scripts import package_script
from scoring.values import BlockValue, ValueFormat, parse_value

PAGE_SIZE = 50
MAX_ROUNDS = 6
FIRST_READ = 8
"""Entries the first round reads from each ZSET at least (later rounds read a page's worth)."""

_AFTER_CURSOR = package_script(__file__, "after_cursor")


_CURSOR = re.compile(r"[0-9]+-[0-9]+", re.ASCII)


class InvalidCursor(ValueError):
    pass


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a block sits in the listing: its last store time (the residency score), then
    its std text."""

    ts: int
    std: str

    def __str__(self) -> str:
        return f"{self.ts}-{self.std}"

    @classmethod
    def parse(cls, text: str) -> "Position":
        if not _CURSOR.fullmatch(text):
            raise InvalidCursor(f"{text!r} is not a cursor ({{residency score}}-{{std hash}})")
        ts, _, std = text.partition("-")
        return cls(int(ts), std)


@dataclass(frozen=True, slots=True)
class Owner:
    """One pod's field of a matrix key: what kthena's router reads."""

    pod: str
    value: BlockValue
    held: tuple[str | None, ...] = ()
    """The media the pod's residency holds the block in (what the Medium filter selects),
    when asked for; the router's value may name another (kthena's one medium per owner)."""

    @property
    def medium(self) -> str | None:
        """The medium kthena's router reads for this owner."""
        return self.value.medium


@dataclass(frozen=True, slots=True)
class BlockRow:
    std: str
    ts: int
    """The newest store second among the ZSETs listed."""
    owners: tuple[Owner, ...]


@dataclass(frozen=True, slots=True)
class BlockPage:
    rows: list[BlockRow]
    next_cursor: Position | None
    """Where the next page starts; None at the end."""


def pods_of_model(pod_models: dict[str, str], model: str) -> list[str]:
    return sorted(pod for pod, served in pod_models.items() if served == model)


def newest_blocks(
    client: redis.Redis,
    model: str,
    zsets: Sequence[str],
    after: Position | None = None,
    limit: int = PAGE_SIZE,
    *,
    oldest_first: bool = False,
) -> BlockPage:
    """One page of the blocks in `zsets` (residency keys of `model`'s pods) after `after`,
    with their owners from one pipelined HGETALL of their matrix keys."""
    positions, resume = merge(client, zsets, after, limit, oldest_first)
    page, more = positions[:limit], len(positions) > limit
    next_cursor = Position(*page[-1]) if more else resume
    return BlockPage(_rows(client, model, page), next_cursor)


def owners_by_block(
    client: redis.Redis, model: str, stds: Sequence[str | int], *, residency: bool = False
) -> list[tuple[Owner, ...]]:
    """Every owner of each block, from one pipelined HGETALL of the matrix keys, by pod. With
    `residency`, each owner's held media too (two more round trips). Under the legacy value
    format (compatibility.md 2.7) the values name no medium: each owner's is the best its
    residency holds the block in (the same two round trips)."""
    pipe = client.pipeline(transaction=False)
    for std in stds:
        pipe.hgetall(keys.block_key(model, int(std)))
    found = pipe.execute() if stds else []
    owners = [
        [Owner(pod, parse_value(raw)) for pod, raw in sorted(fields.items())] for fields in found
    ]
    legacy = value_format() is ValueFormat.LEGACY
    if legacy or residency:
        wanted = [
            (owner.pod, str(std)) for std, row in zip(stds, owners, strict=True) for owner in row
        ]
        held = held_media(client, wanted)
        weights = active_weights().weights
        for std, row in zip(stds, owners, strict=True):
            for i, owner in enumerate(row):
                media = held.get((owner.pod, str(std)), [])
                value = owner.value
                if legacy and media and value.medium is None:
                    value = value._replace(medium=weights.best_medium(media))
                row[i] = Owner(owner.pod, value, tuple(media) if residency else ())
    return [tuple(row) for row in owners]


def _rows(client: redis.Redis, model: str, page: list[tuple[int, str]]) -> list[BlockRow]:
    owners = owners_by_block(client, model, [std for _, std in page], residency=True)
    return [
        BlockRow(std, keys.residency_seconds(ts), held)
        for (ts, std), held in zip(page, owners, strict=True)
    ]


def merge(
    client: redis.Redis,
    zsets: Sequence[str],
    after: Position | None,
    limit: int,
    oldest_first: bool = False,
) -> tuple[list[tuple[int, str]], Position | None]:
    """Steps 1-4 of the module docstring. Returns up to `limit + 1` (ts, std) in listing
    order, and where to resume when the rounds ran out first (None when exhausted)."""
    want = limit + 1
    # A first read of `want` entries from each of dozens of ZSETs fetches far more than one
    # page; a share of it is usually enough, and a ZSET that runs dry is read further.
    count = min(want, max(FIRST_READ, 2 * want // max(1, len(zsets)) + 1))
    start = (after.ts, after.std) if after else None
    last: list[tuple[int, str] | None] = [start] * len(zsets)
    unread = [0] * len(zsets)  # entries of each ZSET still in the pool
    more = set(range(len(zsets)))  # ZSETs that may hold entries not yet read
    pool: list[tuple[int, str, int]] = []  # the next entry in listing order is at the end
    found: list[tuple[int, str]] = []
    seen: set[str] = set()
    examined = start
    first = min if oldest_first else max  # of two positions, the one listed first
    for _ in range(MAX_ROUNDS):
        if refill := [i for i in sorted(more) if not unread[i]]:
            _read(client, zsets, refill, last, unread, more, pool, count, oldest_first)
            count = want
        horizon = first((last[i] for i in more), default=None)  # type: ignore[type-var]
        taken: list[tuple[int, str]] = []
        while pool and len(taken) < want - len(found):
            ts, std, i = pool[-1]
            if horizon is not None and first((ts, std), horizon) != (ts, std):
                break
            pool.pop()
            unread[i] -= 1
            examined = (ts, std)
            if std not in seen:
                taken.append((ts, std))
        # From the newest on, a std's first position taken is its newest: nothing to check.
        checked = taken if start is None and not oldest_first else None
        for kept in checked or _newest_here(client, zsets, taken):
            if kept[1] not in seen:
                seen.add(kept[1])
                found.append(kept)
        if len(found) >= want or not (pool or more):
            return found, None
    return found, Position(*examined) if examined else None


def _read(
    client: redis.Redis,
    zsets: Sequence[str],
    refill: list[int],
    last: list[tuple[int, str] | None],
    unread: list[int],
    more: set[int],
    pool: list[tuple[int, str, int]],
    count: int,
    oldest_first: bool,
) -> None:
    """Step 1: the next `count` entries of each ZSET in `refill`, one round trip."""
    pipe = client.pipeline(transaction=False)
    calls = []
    for i in refill:
        ts, std = last[i] or ("", "")
        call = ([zsets[i]], [ts, std, count, int(oldest_first)])
        calls.append(call)
        _AFTER_CURSOR.queue(pipe, *call)
    replies = pipe.execute(raise_on_error=False)
    for i, reply, (zset, args) in zip(refill, replies, calls, strict=True):
        flat = _AFTER_CURSOR.finish(client, reply, zset, args)
        if isinstance(flat, Exception):
            raise flat
        pairs = zip(flat[::2], flat[1::2], strict=True)
        entries = [(int(score), std, i) for std, score in pairs]
        if len(entries) < count:
            more.discard(i)
        if entries:
            last[i] = entries[-1][:2]
            unread[i] += len(entries)
            pool += entries
    pool.sort(reverse=oldest_first)


def _newest_here(
    client: redis.Redis, zsets: Sequence[str], taken: list[tuple[int, str]]
) -> list[tuple[int, str]]:
    """Step 3: keep the blocks whose newest position among `zsets` is the one taken."""
    if not taken or len(zsets) == 1:
        return taken
    members = [std for _, std in taken]
    pipe = client.pipeline(transaction=False)
    for key in zsets:
        pipe.zmscore(key, members)
    replies = pipe.execute()
    newest = [
        max((score for score in scores if score is not None), default=None)
        for scores in zip(*replies, strict=True)
    ]
    return [(ts, std) for (ts, std), top in zip(taken, newest, strict=True) if top == ts]
