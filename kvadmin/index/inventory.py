"""What the index holds, pod by pod: the model and engine kind it was written for, the media
with residency and the streams with engine blocks (`kvadmin:pods`, `kvadmin:pod-kinds`,
`kvadmin:media:{pod}`, `kvadmin:ranks:{pod}`, see `kvadmin.index.writer`).

One pipelined read in two round trips whatever the number of pods, and the one place that
reads these keys: /metrics and the dashboard (`kvadmin.metrics.fleet`), the pod and block
pages (`kvadmin.residency`), the media seen on /weights/ and garbage collection.
"""

from collections.abc import Iterable
from dataclasses import dataclass

import redis

from kvadmin.index.replies import texts
from kvadmin.index.streams import StreamId
from scoring import keys


@dataclass(frozen=True, slots=True)
class PodInventory:
    pod: str
    model: str | None
    """The model the pod's entries are of; None when the index holds none of the pod."""
    kind: str | None
    media: tuple[str, ...]
    """Media (as the engine spelled them, "" for none) with residency entries, sorted."""
    stream_names: tuple[str, ...]
    """The `{stream}` key parts of the streams with engine blocks, sorted; older builds may
    have left names of no current stream (see `streams`)."""

    @property
    def streams(self) -> list[StreamId]:
        """The current streams among `stream_names`."""
        named = (StreamId.from_name(self.pod, name) for name in self.stream_names)
        return [stream for stream in named if stream is not None]


def read_inventory(
    client: redis.Redis, also: Iterable[str] = (), only: Iterable[str] | None = None
) -> dict[str, PodInventory]:
    """Pod -> its inventory, sorted by pod: every pod the index holds and those of `also`
    (registered engines, say), or with `only` just those pods."""
    pipe = client.pipeline(transaction=False)
    if only is None:
        pipe.hgetall(keys.POD_MODELS_KEY)
        pipe.hgetall(keys.POD_KINDS_KEY)
        models, kinds = (texts(reply) for reply in pipe.execute())
        pods = sorted(set(models) | set(also))
    else:
        pods = sorted(set(only))
        if not pods:
            return {}
        pipe.hmget(keys.POD_MODELS_KEY, pods)
        pipe.hmget(keys.POD_KINDS_KEY, pods)
        models, kinds = (dict(zip(pods, texts(r), strict=True)) for r in pipe.execute())
    for pod in pods:
        pipe.smembers(keys.pod_media_key(pod))
        pipe.smembers(keys.pod_ranks_key(pod))
    replies = pipe.execute() if pods else []
    return {
        pod: PodInventory(
            pod,
            models.get(pod),
            kinds.get(pod),
            tuple(sorted(texts(replies[2 * i]))),
            tuple(sorted(texts(replies[2 * i + 1]))),
        )
        for i, pod in enumerate(pods)
    }
