"""The media engines actually reported, as the index records them (compatibility.md 3).

Operators configure weights by name; an engine that reports a medium nobody configured makes
it weigh the fallback silently. The index's inventory
(`kvadmin.index.inventory`: the media of every pod it holds) shows those media on the page.
"""

from dataclasses import dataclass, field

import redis

from kvadmin.index.inventory import read_inventory
from scoring.weights import normalize_name


@dataclass(slots=True)
class SeenMedium:
    name: str
    """Normalized ("" for blocks stored without a medium)."""
    spellings: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)


def media_in_index(client: redis.Redis) -> dict[str, SeenMedium]:
    """Normalized medium name -> how engines spelled it and which pods hold blocks in it.
    Two round trips whatever the number of pods."""
    seen: dict[str, SeenMedium] = {}
    for pod, held in read_inventory(client).items():
        for medium in held.media:
            name = normalize_name(medium)
            entry = seen.setdefault(name, SeenMedium(name))
            entry.spellings.add(medium)
            entry.pods.add(pod)
    return dict(sorted(seen.items()))
