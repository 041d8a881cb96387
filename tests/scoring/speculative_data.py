"""Writing and reading speculative entries in the layout route_record.lua keeps
(scoring.keys.speculative_key: each block names a group of (pod, expiry) entries), with no code
shared with scoring/."""

import json
from collections.abc import Mapping

import redis

from scoring.keys import speculative_groups_key, speculative_key
from tests.index import MODEL


def write_speculative(
    client: redis.Redis, entries: Mapping[int, Mapping[str, float]], model: str = MODEL
) -> None:
    """`entries`: block hash -> pod -> expiry (unix ms); each block gets a group of its own."""
    for block, pods in entries.items():
        if pods:
            group = f"g{block}"
            items = [item for pod in sorted(pods) for item in (pod, repr(float(pods[pod])))]
            client.hset(speculative_groups_key(model), group, json.dumps(items))
            client.hset(speculative_key(model), str(block), group)


def speculative_of(client: redis.Redis, pod: str, model: str = MODEL) -> dict[int, float]:
    """The pod's entries as Redis holds them: block hash -> expiry (unix ms), expired included."""
    groups = client.hgetall(speculative_groups_key(model))
    held = {}
    for block, group in client.hgetall(speculative_key(model)).items():
        items = json.loads(groups.get(group, "[]")) if block else []
        expiries = dict(zip(items[::2], items[1::2], strict=True))
        if pod in expiries:
            held[int(block)] = float(expiries[pod])
    return held
