"""/blocks/ sorted by how many pods hold each block, within a bounded window.

The index keeps no order by owner count: the number of pods holding a block is the length of
its matrix HASH, one key per block. Sorting every block of a model by it would read one key
per block on every page (100,000 blocks, 100,000 HLENs), so the sort covers a window: the
blocks of the newest SORT_WINDOW block copies the filters select (entries of their residency
ZSETs, as the page counts them: a block on two pods is two copies), each block at its newest
store time and counted with one pipelined HLEN. The page says how many blocks the window held
and whether that was all of them.

The window is read by time, not by merging pages: a binary search over the store time inside
Redis (`window_threshold.lua`: one ZCOUNT per ZSET a step, about 40 steps) finds the newest
time T with at least SORT_WINDOW block copies stored at or after it; one pipelined
ZRANGE BYSCORE per ZSET then reads those copies (SORT_WINDOW and the ties at T, however the
blocks spread over the ZSETs), and each block keeps its newest.

A cursor is the last row's (owners, last store time, std): the next page is the window's rows
after it in that order, so pages neither repeat nor skip a block that stays in the window,
keeps its owner count and is not stored again meanwhile (the window moves with the newest
blocks; a block whose count or store time changed moves to its new place, which may be on a
page already shown or still to come).

Each page's search is one script of about 40 ZCOUNTs per selected ZSET: about 5 ms per
hundred ZSETs of Redis's time (a fleet of 1,000 pods with two tiers holds Redis for about
100 ms per unfiltered page; filtering by pod or medium narrows it).
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from kvadmin.residency.listing import BlockRow, owners_by_block
from scoring import keys
from scoring.scripts import package_script

SORT_WINDOW = 5_000
"""The newest block copies whose blocks a sort by owners ranks (one HLEN a block per page)."""

_CURSOR = re.compile(r"[0-9]+-[0-9]+-[0-9]+", re.ASCII)
_THRESHOLD = package_script(__file__, "window_threshold")
_OWNER_COUNTS = package_script(__file__, "owner_counts")


@dataclass(frozen=True, slots=True, order=True)
class Ranked:
    """A block's place in the sort by owners: its owner count, then its listing position."""

    owners: int
    ts: int
    std: str

    def __str__(self) -> str:
        return f"{self.owners}-{self.ts}-{self.std}"

    @classmethod
    def parse(cls, text: str) -> "Ranked":
        if not _CURSOR.fullmatch(text):
            raise ValueError(f"{text!r} is not a cursor ({{owners}}-{{residency score}}-{{std}})")
        owners, ts, std = text.split("-")
        return cls(int(owners), int(ts), std)


@dataclass(frozen=True, slots=True)
class RankedPage:
    rows: list[BlockRow]
    next_cursor: Ranked | None
    window: int
    """Blocks ranked: the newest SORT_WINDOW at most."""
    whole: bool
    """The window held every block the filters select."""


def by_owners(
    client: redis.Redis,
    model: str,
    zsets: Sequence[str],
    after: Ranked | None,
    limit: int,
    *,
    fewest_first: bool = False,
) -> RankedPage:
    """One page of the window's blocks, most owners first then newest (or all of it reversed:
    fewest owners first, then oldest)."""
    window, whole = newest_window(client, zsets)
    block_keys = [keys.block_key(model, int(std)) for _, std in window]
    counts = _OWNER_COUNTS(client, block_keys, []) if window else []
    ranked = sorted(
        ((n, ts, std) for (ts, std), n in zip(window, counts, strict=True)),
        reverse=not fewest_first,
    )
    if after is not None:
        bound = (after.owners, after.ts, after.std)
        ranked = [r for r in ranked if (r > bound if fewest_first else r < bound)]
    page, more = [Ranked(*r) for r in ranked[:limit]], len(ranked) > limit
    owners = owners_by_block(client, model, [r.std for r in page], residency=True)
    rows = [
        BlockRow(r.std, keys.residency_seconds(r.ts), held)
        for r, held in zip(page, owners, strict=True)
    ]
    return RankedPage(rows, page[-1] if more else None, len(window), whole)


def newest_window(
    client: redis.Redis, zsets: Sequence[str], size: int | None = None
) -> tuple[list[tuple[int, str]], bool]:
    """The blocks of the newest `size` (SORT_WINDOW) copies in `zsets` as (newest store time,
    std), newest first, and whether that is all of them."""
    size = SORT_WINDOW if size is None else size
    low = _THRESHOLD(client, list(zsets), [size]) if zsets else "-inf"
    pipe = client.pipeline(transaction=False)
    for key in zsets:
        pipe.zrange(key, low, "+inf", byscore=True, withscores=True)
    newest: dict[str, int] = {}
    for entries in pipe.execute() if zsets else []:
        for std, score in entries:
            newest[std] = max(newest.get(std, 0), int(score))
    ordered = sorted(((ts, std) for std, ts in newest.items()), reverse=True)
    return ordered, low == "-inf"
