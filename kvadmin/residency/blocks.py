"""The /blocks/ page: which models the index knows, their pods and media, and one page of
their blocks (see `listing` for how a page is read)."""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import redis

from kvadmin.engines.models import Engine
from kvadmin.index.inventory import read_inventory
from kvadmin.redis_clients import index_client
from kvadmin.residency.listing import (
    PAGE_SIZE,
    BlockPage,
    BlockRow,
    InvalidCursor,
    Position,
    newest_blocks,
    pods_of_model,
)
from scoring import keys
from scoring.weights import normalize_name

NO_MEDIUM = "(none)"
"""How the filter names the empty medium (blocks stored with no medium)."""


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
    after: Position | None = None


@dataclass(slots=True)
class BlocksListing:
    models: list[str]
    model: str | None
    pods: list[str]
    """The model's pods: registered for it or holding its blocks."""
    media: list[str]
    """Media the model's pods hold blocks in, as spelled; "" is no medium."""
    query: BlocksQuery
    page: BlockPage = field(default_factory=lambda: BlockPage([], None))
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
    """One page of a model's blocks (the first known model when none is named). Raises
    UnknownModel for a model nobody serves or holds, InvalidFilter for a pod not serving it."""
    client = client or index_client()
    inventory = read_inventory(client)
    pod_models = {pod: held.model for pod, held in inventory.items() if held.model is not None}
    models = known_models(pod_models)
    model = query.model or (models[0] if models else None)
    if model is None:
        return BlocksListing([], None, [], [], query, now=int(time.time()))
    if model not in models:
        raise UnknownModel(model)
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
    return BlocksListing(
        models=models,
        model=model,
        pods=pods,
        media=sorted(set().union(*media.values())),
        query=query,
        page=newest_blocks(client, model, zsets, query.after, limit),
        now=int(time.time()),
        zsets=zsets,
        matched=sum(pipe.execute()) if zsets else 0,
    )


def all_pages(client: redis.Redis, listing: BlocksListing, most: int) -> Iterator[BlockRow]:
    """The listing's rows from its first page on, at most `most` of them (the CSV export)."""
    page, shown = listing.page, 0
    while True:
        yield from page.rows[: most - shown]
        shown += len(page.rows)
        if shown >= most or page.next_cursor is None or listing.model is None:
            return
        page = newest_blocks(client, listing.model, listing.zsets, page.next_cursor)


def _selected(medium: str, wanted: str | None) -> bool:
    if not wanted:
        return True
    if wanted == NO_MEDIUM:
        return medium == ""
    return normalize_name(medium) == normalize_name(wanted)


def parse_query(params: dict[str, str]) -> BlocksQuery:
    """The listing's query string; raises InvalidFilter (or InvalidCursor) for bad values."""
    after = params.get("after") or None
    return BlocksQuery(
        model=params.get("model") or None,
        pod=params.get("pod") or None,
        medium=params.get("medium") or None,
        after=_cursor(after) if after else None,
    )


def _cursor(text: str) -> Position:
    try:
        return Position.parse(text)
    except InvalidCursor as error:
        raise InvalidFilter(str(error)) from None
