"""The /blocks/ page: which models the index knows, their pods and media, and one page of
their blocks (see `listing` for how a page is read).

Sorting is the server's, over every block the filters select, with the sort in the URL
(`?sort=...&dir=...`) and a cursor per sort:
- by last store time, newest first (the default) or oldest first: exact, whatever the number
  of blocks (the residency ZSETs are kept in that order);
- by owners (how many pods hold the block): over the blocks of the newest
  `ranking.SORT_WINDOW` block copies only, which the page says (the index keeps no order by
  owner count).
The block hash is no sort: its order means nothing to an operator.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import redis

from kvadmin.engines.models import Engine
from kvadmin.index.groups import IndexGroup, group_of, index_groups
from kvadmin.index.inventory import read_inventory
from kvadmin.residency.listing import (
    PAGE_SIZE,
    BlockRow,
    Owner,
    Position,
    newest_blocks,
    pods_of_model,
)
from kvadmin.residency.ranking import Ranked, RankedPage, by_owners
from scoring import keys
from scoring.weights import normalize_name

NO_MEDIUM = "(none)"
"""How the filter names the empty medium (blocks stored with no medium)."""

LAST_STORED, OWNERS = "last-stored", "owners"
SORTS = (LAST_STORED, OWNERS)


class UnknownModel(LookupError):
    pass


class InvalidFilter(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class BlocksQuery:
    model: str | None = None
    pod: str | None = None
    medium: str | None = None
    """A medium as engines spell it (matched case-insensitively), NO_MEDIUM, or None for all."""
    sort: str = LAST_STORED
    descending: bool = True
    """Newest (most owners) first; False: oldest (fewest owners) first."""
    after: Position | Ranked | None = None
    """The cursor, of the sort's kind."""

    def params(self) -> dict[str, str]:
        """The filters and the sort as query parameters (defaults left out), without the
        cursor: for the next page, the export and the sort links."""
        values = {"model": self.model, "pod": self.pod, "medium": self.medium}
        if self.sort != LAST_STORED or not self.descending:
            values |= {"sort": self.sort, "dir": "desc" if self.descending else "asc"}
        return {name: value for name, value in values.items() if value}


@dataclass(slots=True)
class BlocksListing:
    models: list[str]
    model: str | None
    pods: list[str]
    """The model's pods: registered for it or holding its blocks."""
    media: list[str]
    """Media the model's pods hold blocks in, as spelled; "" is no medium."""
    query: BlocksQuery
    rows: list[BlockRow] = field(default_factory=list)
    next_cursor: Position | Ranked | None = None
    """Where the next page starts; None at the end."""
    window: int | None = None
    """Sorted by owners: the blocks ranked (those of the newest SORT_WINDOW copies)."""
    whole_window: bool = True
    """Sorted by owners: the window held every block the filters select."""
    now: int = 0
    zsets: list[str] = field(default_factory=list)
    """The residency ZSETs the filters select (for the export's further pages)."""
    matched: int = 0
    """Block copies the filters select (ZCARD sums: a block on two pods counts twice)."""

    @property
    def unknown_medium(self) -> bool:
        """`?medium=` names a medium none of the model's pods holds blocks in."""
        wanted = self.query.medium
        return bool(wanted) and not any(_selected(m, wanted) for m in self.media)


def known_models(pod_models: dict[str, str]) -> list[str]:
    """Models of registered engines and models with entries in the index."""
    registered = Engine.objects.values_list("model", flat=True).distinct()
    return sorted(set(registered) | set(pod_models.values()))


def browse_blocks(
    query: BlocksQuery, limit: int = PAGE_SIZE, client: redis.Redis | None = None
) -> BlocksListing:
    """One page of a model's blocks (the first known model when none is named), from the
    model's index group (the models listed are those of every group). Raises
    UnknownModel for a model nobody serves or holds, InvalidFilter for a pod not serving it."""
    # Keyed by group (None: the caller's client, holding every model), each client taken once.
    clients: dict[IndexGroup | None, redis.Redis] = (
        {None: client} if client is not None else {g: g.client() for g in index_groups()}
    )
    inventories = {group: read_inventory(index) for group, index in clients.items()}
    pod_models = {
        pod: held.model
        for inventory in inventories.values()
        for pod, held in inventory.items()
        if held.model is not None
    }
    models = known_models(pod_models)
    model = query.model or (models[0] if models else None)
    if model is None:
        return BlocksListing([], None, [], [], query, now=int(time.time()))
    if model not in models:
        raise UnknownModel(model)
    group = None if client is not None else group_of(model)  # the model's blocks: its group
    client, inventory = clients[group], inventories[group]
    pod_models = {pod: held.model for pod, held in inventory.items() if held.model is not None}
    indexed = pods_of_model(pod_models, model)
    registered = Engine.objects.filter(model=model).values_list("pod", flat=True)
    pods = sorted(set(indexed) | set(registered))
    if query.pod and query.pod not in pods:
        raise InvalidFilter(f"pod {query.pod!r} does not serve {model!r}")
    media = {pod: inventory[pod].media for pod in indexed}
    zsets = [
        keys.residency_key(pod, medium)
        for pod in indexed
        if not query.pod or pod == query.pod
        for medium in sorted(media[pod])
        if _selected(medium, query.medium)
    ]
    pipe = client.pipeline(transaction=False)
    for zset in zsets:
        pipe.zcard(zset)
    listing = BlocksListing(
        models=models,
        model=model,
        pods=pods,
        media=sorted(set().union(*media.values())),
        query=query,
        now=int(time.time()),
        zsets=zsets,
        matched=sum(pipe.execute()) if zsets else 0,
    )
    _read_page(client, listing, query.after, limit)
    return listing


def _read_page(
    client: redis.Redis, listing: BlocksListing, after: Position | Ranked | None, limit: int
) -> None:
    """The listing's rows after `after`, in its sort."""
    query, model = listing.query, listing.model
    assert model is not None
    if query.sort == OWNERS:
        assert after is None or isinstance(after, Ranked)
        ranked: RankedPage = by_owners(
            client, model, listing.zsets, after, limit, fewest_first=not query.descending
        )
        listing.rows, listing.next_cursor = ranked.rows, ranked.next_cursor
        listing.window, listing.whole_window = ranked.window, ranked.whole
        return
    assert after is None or isinstance(after, Position)
    page = newest_blocks(
        client, model, listing.zsets, after, limit, oldest_first=not query.descending
    )
    listing.rows, listing.next_cursor = page.rows, page.next_cursor


def all_pages(client: redis.Redis, listing: BlocksListing, most: int) -> Iterator[BlockRow]:
    """The listing's rows from its first page on, in its sort, at most `most` of them (the
    CSV export). By owners, the rest is read at once: each page ranks the whole window again,
    and one ranking keeps the rows from shifting between pages."""
    shown = 0
    while True:
        yield from listing.rows[: most - shown]
        shown += len(listing.rows)
        if shown >= most or listing.next_cursor is None or listing.model is None:
            return
        size = most - shown if listing.query.sort == OWNERS else PAGE_SIZE
        _read_page(client, listing, listing.next_cursor, size)


def matched_medium(owner: Owner, wanted: str | None) -> str | None:
    """The medium a blocks row shows for an owner: filtered by medium, the one of the pod's
    held media that the filter selected (the residency's); otherwise, or when the pod does not
    hold the block there, the medium kthena's router reads (its value)."""
    if wanted:
        for medium in owner.held:
            if _selected(medium or "", wanted):
                return medium
    return owner.medium


def _selected(medium: str, wanted: str | None) -> bool:
    if not wanted:
        return True
    if wanted == NO_MEDIUM:
        return medium == ""
    return normalize_name(medium) == normalize_name(wanted)


def parse_query(params: dict[str, str]) -> BlocksQuery:
    """The listing's query string; raises InvalidFilter for bad values."""
    sort = params.get("sort") or LAST_STORED
    if sort not in SORTS:
        raise InvalidFilter(f"sort={sort!r}: blocks sort by {' or '.join(SORTS)}")
    direction = params.get("dir") or "desc"
    if direction not in ("asc", "desc"):
        raise InvalidFilter(f"dir={direction!r}: use asc or desc")
    after = params.get("after") or None
    return BlocksQuery(
        model=params.get("model") or None,
        pod=params.get("pod") or None,
        medium=params.get("medium") or None,
        sort=sort,
        descending=direction == "desc",
        after=_cursor(after, sort) if after else None,
    )


def _cursor(text: str, sort: str) -> Position | Ranked:
    try:
        return Ranked.parse(text) if sort == OWNERS else Position.parse(text)
    except ValueError as error:  # InvalidCursor included
        raise InvalidFilter(str(error)) from None
