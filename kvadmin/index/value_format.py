"""Switching the index's matrix values between the two formats (compatibility.md 2.7), in bounded
steps while ingestion runs.

The writer writes the INDEX_VALUE_FORMAT its process started with; the values already in the
index are rewritten here, one step of at most `keys_per_step` matrix keys at a time:

1. SCAN the next matrix keys (`matrix:kv:block:*`), HGETALL them.
2. Each field in the other format gets its new value: to legacy, the timestamp alone; to tiered,
   the timestamp and the best medium (`TierWeights.best_medium`, the writer's order) the pod's
   residency holds the block in (its media SET, then one ZMSCORE per pod and medium). A legacy
   value whose pod holds the block in no medium stays as it is ("ts" is tiered for no medium).
3. The new values are written by a compare-and-set script: a field the writer changed since
   step 1 is left alone (the writer wrote it in its own format, and a later pass sees it).

A pass ends when SCAN's cursor comes back to 0; SCAN returns every key that existed for the whole
pass. A pass that rewrote nothing finishes the switch, since every value is then in the target
format; otherwise another pass follows, so values written meanwhile by processes still running
with the old format (a rolling restart) are caught too. The state (target, cursor, counts) lives
in Redis (`keys.VALUE_FORMAT_KEY`): a step resumes where the last one stopped, in any process,
and a change of target starts a new pass. One rewriter at a time, by a Redis lock.

Progress is shown as fields checked over an estimate taken at the start of each pass: the pods'
residency entries, one per (pod, block, medium), so at least the pods' fields; it is capped at
99% until the switch finishes.
"""

import time
import uuid
from dataclasses import asdict, dataclass

import redis

from kvadmin.index.replies import from_hash
from scoring import keys
from scoring.scripts import package_script
from scoring.values import ValueFormat
from scoring.weights import TierWeights

LOCK_SECONDS = 60
"""Renewed after every step: a rewriter holding it longer than this has died."""

_COMPARE_AND_SET = package_script(__file__, "rewrite_values")


class AnotherRewriteIsActive(Exception):
    """Another process holds the rewrite lock."""


@dataclass(slots=True)
class RewriteProgress:
    """Where the switch to `target` stands (stored as the hash at `keys.VALUE_FORMAT_KEY`)."""

    target: str
    current: str = ""
    """The format every value is in, once a pass of the switch to it rewrote nothing."""
    cursor: str = "0"
    passes: int = 1
    checked: int = 0
    """Matrix fields looked at in this pass."""
    estimate: int = 0
    """About how many fields a pass looks at (see the module docstring)."""
    rewritten: int = 0
    """Values rewritten since the switch began."""
    pass_rewritten: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def done(self) -> bool:
        return self.current == self.target

    @property
    def percent(self) -> int:
        if self.done:
            return 100
        return min(99, self.checked * 100 // max(1, self.estimate))

    @property
    def target_format(self) -> ValueFormat:
        return ValueFormat(self.target)


def progress(client: redis.Redis) -> RewriteProgress | None:
    """The stored state; None when no switch ever ran (every value is tiered then: the only
    format before the setting existed)."""
    stored = client.hgetall(keys.VALUE_FORMAT_KEY)
    return from_hash(RewriteProgress, stored) if stored else None


def rewrite(
    client: redis.Redis,
    target: ValueFormat,
    weights: TierWeights,
    keys_per_step: int = 500,
    seconds: float = 2.0,
) -> RewriteProgress:
    """Steps towards `target` until it is reached or `seconds` have passed, under the lock
    (AnotherRewriteIsActive if another process holds it). Cheap when there is nothing to do."""
    state = progress(client)
    if state is None and target is ValueFormat.TIERED:
        return RewriteProgress(target.value, current=target.value)
    if state is not None and state.done and state.target_format is target:
        return state
    lock = client.lock(
        keys.VALUE_FORMAT_LOCK_KEY, timeout=LOCK_SECONDS, blocking=False, thread_local=False
    )
    if not lock.acquire(token=uuid.uuid4().hex):
        raise AnotherRewriteIsActive(keys.VALUE_FORMAT_LOCK_KEY)
    try:
        deadline = time.monotonic() + seconds
        while True:
            state = rewrite_step(client, target, weights, keys_per_step)
            if state.done or time.monotonic() > deadline:
                return state
            lock.reacquire()
    finally:
        lock.release()


def rewrite_step(
    client: redis.Redis, target: ValueFormat, weights: TierWeights, keys_per_step: int = 500
) -> RewriteProgress:
    """One bounded step (see the module docstring); the caller holds the lock. The client
    decodes responses (`decode_responses=True`)."""
    state = progress(client)
    if state is None or state.target_format is not target:
        state = _begun(client, target, RewriteProgress(target.value, started_at=time.time()))
    elif state.done:
        return state
    cursor, found = client.scan(
        int(state.cursor), match=f"{keys.BLOCK_KEY_PREFIX}*", count=keys_per_step
    )
    block_keys = list(found)
    pipeline = client.pipeline(transaction=False)
    for key in block_keys:
        pipeline.hgetall(key)
    values = pipeline.execute() if block_keys else []
    changes = _changes(client, target, weights, block_keys, values)
    written = _write(client, changes) if changes else 0
    state.cursor = str(cursor)
    state.checked += sum(len(fields) for fields in values)
    state.estimate = max(state.estimate, state.checked)  # kthena's own writes have no residency
    state.rewritten += written
    state.pass_rewritten += written
    if state.cursor == "0":
        if state.pass_rewritten == 0:
            state.current, state.finished_at = state.target, time.time()
        else:
            state.passes += 1
            state.pass_rewritten = state.checked = 0
            state.estimate = _estimate(client)
    _store(client, state)
    return state


Change = tuple[str, str, str]
"""(field, value as read, new value) of one matrix key."""


def _changes(
    client: redis.Redis,
    target: ValueFormat,
    weights: TierWeights,
    block_keys: list[str],
    values: list[dict[str, str]],
) -> dict[str, list[Change]]:
    """Per matrix key, its fields in the other format and their new values."""
    changes: dict[str, list[Change]] = {}
    if target is ValueFormat.LEGACY:
        for key, owners in zip(block_keys, values, strict=True):
            for pod, value in owners.items():
                timestamp, bar, _medium = value.partition("|")
                if bar:
                    changes.setdefault(key, []).append((pod, value, timestamp))
        return changes
    wanted = [
        (key, pod, value)
        for key, owners in zip(block_keys, values, strict=True)
        for pod, value in owners.items()
        if "|" not in value
    ]
    held = held_media(client, [(pod, _std(key)) for key, pod, _value in wanted])
    for key, pod, value in wanted:
        media = held.get((pod, _std(key)))
        if media:
            new = target.field_value(value, weights.best_medium(media))
            if new != value:
                changes.setdefault(key, []).append((pod, value, new))
    return changes


def held_media(
    client: redis.Redis, owned: list[tuple[str, str]]
) -> dict[tuple[str, str], list[str | None]]:
    """The media each (pod, std) is held in by the pod's residency (two round trips): what a
    tiered value would name the best of, for the rewrite and for pages under the legacy format."""
    pods = sorted({pod for pod, _std in owned})
    if not pods:
        return {}
    pipeline = client.pipeline(transaction=False)
    for pod in pods:
        pipeline.smembers(keys.pod_media_key(pod))
    pod_media = dict(zip(pods, pipeline.execute(), strict=True))
    stds: dict[str, list[str]] = {}
    for pod, std in owned:
        stds.setdefault(pod, []).append(std)
    asked = [(pod, medium) for pod in pods for medium in sorted(pod_media[pod])]
    for pod, medium in asked:
        pipeline.zmscore(keys.residency_key(pod, medium), stds[pod])
    held: dict[tuple[str, str], list[str | None]] = {}
    for (pod, medium), scores in zip(asked, pipeline.execute() if asked else [], strict=True):
        for std, score in zip(stds[pod], scores, strict=True):
            if score is not None:
                held.setdefault((pod, std), []).append(medium or None)
    return held


def _write(client: redis.Redis, changes: dict[str, list[Change]]) -> int:
    script_keys = list(changes)
    args: list[str] = []
    for key in script_keys:
        args.append(str(len(changes[key])))
        for change in changes[key]:
            args += change
    return int(_COMPARE_AND_SET(client, script_keys, args))


def _begun(client: redis.Redis, target: ValueFormat, state: RewriteProgress) -> RewriteProgress:
    state.estimate = _estimate(client)
    client.delete(keys.VALUE_FORMAT_KEY)
    _store(client, state)
    return state


def _estimate(client: redis.Redis) -> int:
    """The pods' residency entries (see the module docstring): two round trips."""
    pods = sorted(client.hkeys(keys.POD_MODELS_KEY))
    if not pods:
        return 0
    pipeline = client.pipeline(transaction=False)
    for pod in pods:
        pipeline.smembers(keys.pod_media_key(pod))
    zsets = [
        keys.residency_key(pod, medium)
        for pod, media in zip(pods, pipeline.execute(), strict=True)
        for medium in media
    ]
    for zset in zsets:
        pipeline.zcard(zset)
    return sum(pipeline.execute()) if zsets else 0


def _store(client: redis.Redis, state: RewriteProgress) -> None:
    client.hset(
        keys.VALUE_FORMAT_KEY, mapping={name: str(value) for name, value in asdict(state).items()}
    )


def _std(key: str) -> str:
    return key.rpartition("@")[2]
