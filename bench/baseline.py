"""kthena's Python sidecar write pattern, the baseline of the ingest benchmark. Not used to
serve: it has every defect compatibility.md 5 lists, on purpose.

Per event, as the sidecar does: a stored event is one MULTI/EXEC pipeline of SET, EXPIRE and
HSET per block (block size = tokens / hashes, placeholders dropped); a removed event is one GET
per hash, then one pipeline of HDEL (the pod's whole ownership, whatever the medium) and DEL;
AllBlocksCleared SCANs the keyspace for the model's matrix keys and the pod's mapping keys.
The one departure: values carry the medium ("ts|MEDIUM", kthena PR #1293) so the index has the
same shape as kvadmin's.
"""

import redis

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from scoring import keys
from scoring.hashing import hash_block


class KthenaBaseline:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def apply_batch(self, pod: str, model: str, kind: str, batch: EventBatch, now: int) -> None:
        for event in batch.events:
            if isinstance(event, BlockStored):
                self._stored(pod, model, kind, event, now)
            elif isinstance(event, BlockRemoved):
                self._removed(pod, model, kind, event)
            elif isinstance(event, AllBlocksCleared):
                self._cleared(pod, model, kind)

    def _stored(self, pod: str, model: str, kind: str, event: BlockStored, now: int) -> None:
        hashes, tokens = event.block_hashes, event.token_ids
        if not hashes or not tokens or len(tokens) % len(hashes):
            return
        size = len(tokens) // len(hashes)
        value = keys.block_value(now, event.medium)
        pipe = self.client.pipeline(transaction=True)
        for i, engine_hash in enumerate(hashes):
            std = hash_block(tokens[i * size : (i + 1) * size])
            mapping = keys.engine_hash_key(kind, pod, engine_hash)
            pipe.set(mapping, str(std))
            pipe.expire(mapping, keys.ENGINE_HASH_TTL_SECONDS)
            pipe.hset(keys.block_key(model, std), pod, value)
        pipe.execute()

    def _removed(self, pod: str, model: str, kind: str, event: BlockRemoved) -> None:
        pipe = self.client.pipeline(transaction=True)
        for engine_hash in event.block_hashes:
            mapping = keys.engine_hash_key(kind, pod, engine_hash)
            std = self.client.get(mapping)
            if std is not None:
                pipe.hdel(keys.block_key(model, int(std)), pod)
                pipe.delete(mapping)
        pipe.execute()

    def _cleared(self, pod: str, model: str, kind: str) -> None:
        matrix = list(self.client.scan_iter(match=f"{keys.BLOCK_KEY_PREFIX}{model}@*", count=500))
        mapping = list(self.client.scan_iter(match=keys.engine_hash_key(kind, pod, "*"), count=500))
        pipe = self.client.pipeline(transaction=True)
        for key in matrix:
            pipe.hdel(key, pod)
        for key in mapping:
            pipe.delete(key)
        pipe.execute()
