"""The speculative entries' layout (scoring.keys.speculative_key, written by route_record.lua,
read by both index readers): at every instant the readers see what the previous layout (one
ZSET per pod: block -> expiry, the latest write winning) held unexpired, up to each pod's
reach; expired entries are cleaned by the decisions that follow, groups no block names are
deleted, the model's entries are capped with the earliest-expiring going first, and the keys
expire with the newest entry."""

import json

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring import route_record
from scoring.hashing import block_hashes
from scoring.index import BaselineIndexReader, IndexReader
from scoring.keys import (
    speculative_count_key,
    speculative_group_refs_key,
    speculative_groups_key,
    speculative_key,
    speculative_keys,
    speculative_records_key,
)
from scoring.route_record import RouteAdvance
from scoring.route_state import StateRequest
from tests.conftest import examples
from tests.index import MODEL, write_kthena_index
from tests.waiting import wait_until

PODS = ["vllm-0.default", "vllm-1.default", "vllm-2.default"]
CHAINS = [block_hashes(list(range(start, start + 16 * 12))) for start in (0, 0, 5000, 9000)]
CHAINS[1] = CHAINS[0][:5] + block_hashes(list(range(7000, 7000 + 16 * 12)))[5:]
"""Four requests of 12 blocks: the second shares the first's first 5 blocks."""


def route(
    client: redis.Redis,
    pod: str,
    blocks: list[int],
    ttl_s: float = 3600.0,
    prefill_s: float = 0.0,
    most: int = 65536,
) -> float:
    """Record a decision routing `blocks` to `pod` as routing does; returns the entries'
    expiry (unix ms: the script takes the TTL in whole ms)."""
    advance = RouteAdvance(MODEL, pod, "d", prefill_s, blocks, ttl_s, most, 2.0, 1024)
    pipeline = client.pipeline(transaction=False)
    args = route_record.queue_record(pipeline, advance, None, 1000)
    recorded = route_record.finish(client, pipeline.execute(raise_on_error=False)[0], args)
    return recorded.prefill_end_ms + round(ttl_s * 1000)


def redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def read_positions(client: redis.Redis, blocks: list[int], now_ms: int) -> list[dict]:
    """Both readers' speculative positions per pod at `now_ms`."""
    request = StateRequest(MODEL, PODS, 2000, now_ms=now_ms)
    found = []
    for reader in (BaselineIndexReader(), IndexReader()):
        _walk, state = reader.read(client, MODEL, blocks, set(PODS), {}, state=request)
        assert state is not None
        found.append({pod: raw.speculative for pod, raw in state.pods.items()})
    return found


def assert_consistent(client: redis.Redis) -> None:
    """Every block names a stored group, every group is named, and its count says by how
    many blocks."""
    named: dict[str, int] = {}
    for block, group in client.hgetall(speculative_key(MODEL)).items():
        if block:  # the hashtable filler
            named[group] = named.get(group, 0) + 1
    groups = client.hgetall(speculative_groups_key(MODEL))
    refs = {group: int(n) for group, n in client.hgetall(speculative_group_refs_key(MODEL)).items()}
    assert set(groups) == set(named) and refs == named


def live_blocks(client: redis.Redis) -> set[int]:
    return {int(block) for block in client.hgetall(speculative_key(MODEL)) if block}


WRITES = st.lists(
    st.tuples(
        st.sampled_from(PODS),
        st.integers(0, len(CHAINS) - 1),
        st.integers(0, 11),
        st.integers(1, 12),
        st.floats(1.0, 600.0),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=WRITES, data=st.data())
def test_the_readers_see_what_a_zset_per_pod_held_up_to_each_pods_reach(
    redis_client: redis.Redis, writes, data: st.DataObject
) -> None:
    redis_client.flushdb()
    write_kthena_index(redis_client, {block: {PODS[0]: "1000|CPU"} for block in CHAINS[0][:4]})
    held: dict[str, dict[int, float]] = {pod: {} for pod in PODS}  # the previous layout
    for pod, chain, first, length, ttl_s in writes:
        blocks = CHAINS[chain][first : first + length]
        expiry = route(redis_client, pod, blocks, ttl_s)
        held[pod].update(dict.fromkeys(blocks, expiry))
    assert_consistent(redis_client)
    expiries = sorted({e for entries in held.values() for e in entries.values()})
    instants = [redis_ms(redis_client), *(int(e) for e in expiries)]  # each expiry's ms
    now = instants[data.draw(st.integers(0, 8), label="instant") % len(instants)]
    request = CHAINS[data.draw(st.integers(0, len(CHAINS) - 1), label="request")]
    runs = {PODS[0]: 4} if request[:4] == CHAINS[0][:4] else {}
    expected = {}
    for pod in PODS:
        positions = []
        for i, block in enumerate(request):
            if held[pod].get(block, 0) > now:
                positions.append(i)
            elif i >= runs.get(pod, 0):
                break
        expected[pod] = tuple(positions)
    assert read_positions(redis_client, request, now) == [expected, expected]


def test_expired_entries_are_removed_by_the_decisions_that_follow(redis_client) -> None:
    """40 decisions queued behind a 3 s prefill on one pod: their entries all expire 1 ms
    after it, together, while an hour-long entry keeps the keys. The next three decisions
    remove all of them (16 records each)."""
    route(redis_client, PODS[2], CHAINS[3])
    expiries = [route(redis_client, PODS[0], CHAINS[0], 0.001, prefill_s=3.0)]
    many = [block_hashes(list(range(100_000 * n, 100_000 * n + 16 * 8))) for n in range(1, 40)]
    expiries += [route(redis_client, PODS[0], blocks, 0.001) for blocks in many]
    assert len(live_blocks(redis_client)) > 200
    wait_until(lambda: redis_ms(redis_client) > max(expiries), what="the entries to expire")
    kept = [block_hashes(list(range(1, 1 + 16 * 4))) for _ in range(3)]
    for blocks in kept:
        route(redis_client, PODS[1], blocks)  # each sweeps up to 16 expired records
    assert live_blocks(redis_client) == set(kept[0] + CHAINS[3])
    assert_consistent(redis_client)
    assert redis_client.zcard(speculative_records_key(MODEL)) == 2
    assert int(redis_client.get(speculative_count_key(MODEL))) == 4 + 12
    assert len(redis_client.hgetall(speculative_groups_key(MODEL))) == 2


def test_the_keys_expire_with_the_newest_entry(redis_client) -> None:
    route(redis_client, PODS[0], CHAINS[0], 5.0)
    latest = route(redis_client, PODS[1], CHAINS[2], 20.0)
    route(redis_client, PODS[2], CHAINS[3], 2.0)
    left = latest - redis_ms(redis_client)
    for key in speculative_keys(MODEL):
        assert left - 1000 < redis_client.pttl(key) <= left + 1, key


def test_beyond_the_most_kept_the_earliest_expiring_records_go_first(redis_client) -> None:
    """Four decisions of 8 blocks, at most 20 entries: each decision past the second drops
    the earliest record. A block a dropped record shares with a later one keeps the later
    entry."""
    chains = [block_hashes(list(range(n * 1000, n * 1000 + 16 * 8))) for n in range(4)]
    for n, chain in enumerate(chains[:3]):
        route(redis_client, PODS[n], chain, 100.0 + n, most=20)
    assert live_blocks(redis_client) == set(chains[1] + chains[2])
    refreshed = chains[1][:3]
    route(redis_client, PODS[1], refreshed + chains[3][:5], 200.0, most=20)
    assert int(redis_client.get(speculative_count_key(MODEL))) <= 20
    assert live_blocks(redis_client) == set(refreshed + chains[2] + chains[3][:5])
    assert_consistent(redis_client)
    now = redis_ms(redis_client)
    assert read_positions(redis_client, chains[1], now)[1][PODS[1]] == (0, 1, 2)


def test_a_request_routed_twice_keeps_one_group_per_run_of_blocks(redis_client) -> None:
    """The blocks one request routes share their group: the readers decode one group per
    run, however many blocks it spans."""
    route(redis_client, PODS[0], CHAINS[0])
    route(redis_client, PODS[1], CHAINS[0][3:])
    groups = redis_client.hmget(speculative_key(MODEL), [str(b) for b in CHAINS[0]])
    assert len(set(groups[:3])) == 1 and len(set(groups[3:])) == 1 and groups[0] != groups[3]
    stored = redis_client.hgetall(speculative_groups_key(MODEL))
    assert [json.loads(stored[group])[::2] for group in (groups[0], groups[3])] == [
        [PODS[0]],
        PODS[:2],
    ]
