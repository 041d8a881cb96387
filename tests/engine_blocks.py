"""The engine blocks of the index as tests compare them: by stream rather than by bucket
(kvadmin.index.engine_blocks owns the layout)."""

import redis

from kvadmin.index import engine_blocks
from scoring import keys

PREFIX = keys.engine_blocks_key("{pod}", "", 0, 0).partition("{pod}")[0]


def stream_blocks(client: redis.Redis, pod: str, stream: str | int) -> dict[str, str]:
    """Engine hash -> entry of every engine block of the stream's live generation, in the long
    form "{std}|{media}" whatever the stored one (`Entry.text`)."""
    return {
        eh: entry.text for eh, entry in engine_blocks.read_stream(client, pod, str(stream)).items()
    }


def by_stream(client: redis.Redis) -> dict[str, dict[str, str]]:
    """Every engine-blocks bucket in the database gathered per stream, named
    "engine blocks {pod}|{stream}" for a live generation and "... generation {n}" for any
    other (a retired one not drained); entries as `stream_blocks` gives them."""
    gathered: dict[str, dict[str, str]] = {}
    for key in client.scan_iter(f"{PREFIX}*"):
        head, _, bucket = key.removeprefix(PREFIX).rpartition(":")
        pod_stream, _, generation = head.rpartition("|")
        pod, _, stream = pod_stream.partition("|")
        live = client.hget(keys.stream_status_key(pod, stream), "generation") or "0"
        name = f"engine blocks {pod_stream}"
        if generation != live:
            name += f" generation {generation}"
        for field, value in client.hgetall(key).items():
            entry = engine_blocks.Entry.parse(value)
            gathered.setdefault(name, {})[engine_blocks.engine_hash(field, int(bucket))] = (
                entry.text
            )
    return gathered


def bucket_keys(client: redis.Redis, pod: str, stream: str) -> list[str]:
    """The keys of every engine-blocks bucket of the stream, any generation."""
    return list(client.scan_iter(f"{PREFIX}{pod}|{stream}|*"))
