"""Switching INDEX_VALUE_FORMAT rewrites the values already in the index (compatibility.md 2.7):
in bounded, resumable steps that show their progress, leaving kvadmin's residency alone, and
catching values written meanwhile by a writer still on the old format."""

import pytest
import redis

from kvadmin.index import status, value_format
from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.serving import Serving
from kvadmin.index.writer import Applier
from scoring import keys
from scoring.hashing import block_hashes
from scoring.index import IndexReader
from scoring.keys import BLOCK_KEY_PREFIX, block_key
from scoring.score import score_walk
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.index import MODEL, OTHER_MODEL, block_tokens
from tests.ingest.blocks import stored
from tests.ingest.conftest import spec_for
from tests.waiting import wait_until

WEIGHTS = TierWeights()
NOW = 1_700_000_000


def _fill(applier: Applier, pods: int = 3, blocks: int = 20, seq: int = 0) -> list[int]:
    """Each pod stores `blocks` blocks in GPU and offloads every third one to CPU (the matrix
    value names GPU, then CPU once GPU lets it go); returns the request's block hashes. Under
    OTHER_MODEL: these are the tokens the ingest loop is sent, and its walk must count its own."""
    tokens = [t for n in range(blocks) for t in block_tokens(n)]
    hashes = tuple(str(seq * 1000 + n) for n in range(blocks))
    for pod in range(pods):
        events: list = [BlockStored(hashes, tuple(tokens), 16, "GPU")]
        for n in range(0, blocks, 3):
            events += [BlockStored((hashes[n],), (), 0, "CPU"), BlockRemoved((hashes[n],), "GPU")]
        batch = EventBatch(ts=0.0, events=events)
        applier.apply_batch(f"p{pod}.ns", OTHER_MODEL, "vllm", 0, seq, batch, now=NOW + seq)
    return block_hashes(tokens)


def _matrix(client: redis.Redis) -> dict[str, dict[str, str]]:
    return {key: client.hgetall(key) for key in client.scan_iter(f"{BLOCK_KEY_PREFIX}*")}


def _not_matrix(client: redis.Redis) -> dict[str, object]:
    return {
        key: client.dump(key)
        for key in client.scan_iter()
        if not key.startswith((BLOCK_KEY_PREFIX, keys.VALUE_FORMAT_KEY))
    }


def _switching(client: redis.Redis, configured: ValueFormat) -> bool:
    """Whether values of the other format may still be in the index, as the pages say it."""
    return Serving(configured, "", value_format.progress(client)).switching


def _switch(
    client: redis.Redis, target: ValueFormat, keys_per_step: int = 4
) -> list[tuple[int, int]]:
    """Step until the switch is done; returns the pass and progress shown after each step."""
    shown = []
    for _ in range(10_000):
        state = value_format.rewrite_step(client, target, WEIGHTS, keys_per_step)
        shown.append((state.passes, state.percent))
        if state.done:
            return shown
    raise AssertionError("the switch did not finish")


def test_to_legacy_and_back_in_bounded_steps(applier: Applier, redis_client: redis.Redis) -> None:
    blocks = _fill(applier)
    tiered = _matrix(redis_client)
    bookkeeping = _not_matrix(redis_client)
    reader = IndexReader()
    tiered_scores = score_walk(
        reader.walk(redis_client, OTHER_MODEL, blocks, None, {}), 20, WEIGHTS
    )

    shown = _switch(redis_client, ValueFormat.LEGACY)
    first_pass = [percent for passes, percent in shown if passes == 1]
    assert len(first_pass) > 3 and first_pass == sorted(first_pass) and first_pass[-1] <= 99
    assert shown[-1] == (2, 100)  # the second pass found nothing left to rewrite
    legacy = _matrix(redis_client)
    assert legacy == {
        key: {pod: value.partition("|")[0] for pod, value in owners.items()}
        for key, owners in tiered.items()
    }
    assert _not_matrix(redis_client) == bookkeeping  # the residency keeps every medium
    walk = reader.walk(redis_client, OTHER_MODEL, blocks, None, {}, value_format=ValueFormat.LEGACY)
    legacy_scores = score_walk(walk, 20, WEIGHTS)
    assert [p.media_runs for p in legacy_scores.pods] == [p.media_runs for p in tiered_scores.pods]
    assert not _switching(redis_client, ValueFormat.LEGACY)

    _switch(redis_client, ValueFormat.TIERED)
    assert _matrix(redis_client) == tiered


def test_a_switch_resumes_where_it_stopped(applier: Applier, redis_client: redis.Redis) -> None:
    _fill(applier)
    first = value_format.rewrite_step(redis_client, ValueFormat.LEGACY, WEIGHTS, 4)
    assert first.cursor != "0" and not first.done
    assert _switching(redis_client, ValueFormat.LEGACY)  # both formats
    # Another process (a new client, a restarted worker) goes on from the stored cursor.
    other = redis.Redis(connection_pool=redis_client.connection_pool)
    second = value_format.rewrite_step(other, ValueFormat.LEGACY, WEIGHTS, 4)
    assert second.cursor != first.cursor and second.checked >= first.checked  # not from 0
    assert second.passes == 1 and value_format.progress(redis_client) == second


def test_values_written_in_the_old_format_meanwhile_are_caught_by_another_pass(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """A worker still running the tiered writer stores blocks while the switch to legacy runs:
    the pass that rewrote values is followed by another, until one finds nothing to rewrite."""
    _fill(applier, pods=2)
    state = value_format.rewrite_step(redis_client, ValueFormat.LEGACY, WEIGHTS, 4)
    _fill(applier, pods=2, blocks=30, seq=1)  # between two steps of the first pass
    while state.passes == 1:
        state = value_format.rewrite_step(redis_client, ValueFormat.LEGACY, WEIGHTS, 4)
    assert not state.done
    _switch(redis_client, ValueFormat.LEGACY)
    assert all("|" not in v for owners in _matrix(redis_client).values() for v in owners.values())


def test_a_legacy_value_without_residency_stays_as_it_is(redis_client: redis.Redis) -> None:
    """kthena's own sidecar, or an index from before kvadmin kept residency: no medium known."""
    redis_client.hset(block_key(MODEL, 5), "p.ns", "123")
    redis_client.hset(keys.VALUE_FORMAT_KEY, mapping={"target": "legacy", "current": "legacy"})
    _switch(redis_client, ValueFormat.TIERED)
    assert redis_client.hget(block_key(MODEL, 5), "p.ns") == "123"


def test_an_index_with_no_switch_is_tiered(redis_client: redis.Redis) -> None:
    assert not _switching(redis_client, ValueFormat.TIERED)
    done = value_format.rewrite(redis_client, ValueFormat.TIERED, WEIGHTS)
    assert done.done and not redis_client.exists(keys.VALUE_FORMAT_KEY)


def test_one_rewriter_at_a_time(applier: Applier, redis_client: redis.Redis) -> None:
    _fill(applier)
    lock = redis_client.lock(keys.VALUE_FORMAT_LOCK_KEY, timeout=10)
    assert lock.acquire(blocking=False)
    with pytest.raises(value_format.AnotherRewriteIsActive):
        value_format.rewrite(redis_client, ValueFormat.LEGACY, WEIGHTS)
    lock.release()
    assert value_format.rewrite(redis_client, ValueFormat.LEGACY, WEIGHTS).done


def test_the_switch_runs_while_the_ingest_loop_writes(
    applier: Applier, redis_client: redis.Redis, publisher, start_loop
) -> None:
    """Workers restarted with the legacy format ingest while the switch rewrites what the
    tiered writer left: every value ends legacy, the media stay in the residency."""
    _fill(applier, pods=2, blocks=60)
    spec = spec_for(publisher)
    start_loop([spec], value_format=ValueFormat.LEGACY)
    wait_until(lambda: status.read_statuses(redis_client, [spec.id])[0].connected, what="connect")
    publisher.wait_for_subscribers()
    state = None
    for n in range(40):
        seq = publisher.publish([stored(n, medium="GPU" if n % 2 else "CPU")])
        state = value_format.rewrite_step(redis_client, ValueFormat.LEGACY, WEIGHTS, 3)
    wait_until(lambda: status.last_seq(redis_client, spec.id) >= seq, what="every batch applied")
    assert state is not None and not state.done
    _switch(redis_client, ValueFormat.LEGACY)
    values = [v for owners in _matrix(redis_client).values() for v in owners.values()]
    assert values and all("|" not in value for value in values)
    reader = IndexReader()
    request = [t for n in range(4) for t in block_tokens(n)]
    walk = reader.walk(
        redis_client,
        MODEL,
        block_hashes(request),
        None,
        {},
        value_format=ValueFormat.LEGACY,
    )
    runs = score_walk(walk, 4, WEIGHTS).pods[0].media_runs
    assert runs == (("CPU", 1), ("GPU", 1), ("CPU", 1), ("GPU", 1))
