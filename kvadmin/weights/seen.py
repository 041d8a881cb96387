"""The media engines actually reported, as the index records them (compatibility.md 3).

Operators configure weights by name; an engine that reports a medium nobody configured makes
it weigh the fallback silently. The index's inventory
(`kvadmin.index.inventory`: the media of every pod it holds) shows those media on the page.
"""

from dataclasses import dataclass, field

from kvadmin.index.groups import index_groups
from kvadmin.index.inventory import read_inventory
from scoring.weights import normalize_name


@dataclass(slots=True)
class SeenMedium:
    name: str
    """Normalized ("" for blocks stored without a medium)."""
    spellings: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)


def media_in_index() -> dict[str, SeenMedium]:
    """Normalized medium name -> how engines spelled it and which pods hold blocks in it, in
    every index group. Two round trips per group whatever the number of pods."""
    seen: dict[str, SeenMedium] = {}
    held_by_pod = (
        (pod, held)
        for group in index_groups()
        for pod, held in read_inventory(group.client()).items()
    )
    for pod, held in held_by_pod:
        for medium in held.media:
            name = normalize_name(medium)
            entry = seen.setdefault(name, SeenMedium(name))
            entry.spellings.add(medium)
            entry.pods.add(pod)
    return dict(sorted(seen.items()))
