"""A stream's engine block held in GPU or CPU alone has its std alone as its value, an integer
Redis keeps in 8 bytes ("{std}", "-{std}"); an index written before, every value
"{std}|{media}", is read as it is, changes under later events as a new one, and garbage
collection rewrites its values short."""

import pytest
import redis

from kvadmin.index import engine_blocks, gc
from kvadmin.index.engine_blocks import Entry
from kvadmin.index.events import BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring import keys
from scoring.hashing import hash_block
from tests.engine_blocks import PREFIX, stream_blocks
from tests.index import MAPPING_KEYS, MODEL
from tests.operations.synthetic import snapshot

POD = "p.ns"
TOKENS = tuple(range(16 * 40))
HASHES = tuple(str(18_000_000_000_000_000_000 + i) for i in range(40))


def _std(n: int) -> str:
    return str(hash_block(TOKENS[16 * n : 16 * n + 16]))


def _send(applier: Applier, rank: int, seq: int, *events: Event) -> None:
    applier.apply_batch(POD, MODEL, "vllm", rank, seq, EventBatch(ts=0.0, events=list(events)), 100)


def _first(applier: Applier) -> None:
    """Two ranks; blocks in GPU alone, in GPU and CPU, and in CPU alone."""
    _send(applier, 0, 0, BlockStored(HASHES[:30], TOKENS[: 16 * 30], 16, "GPU"))
    _send(applier, 0, 1, BlockStored(HASHES[:20], (), 0, "CPU"), BlockRemoved(HASHES[:10], "GPU"))
    _send(applier, 1, 0, BlockStored(HASHES[30:], TOKENS[16 * 30 :], 16, "GPU"))


def _then(applier: Applier) -> None:
    """Removals, placeholders, offloads and stores over blocks of every kind."""
    _send(applier, 0, 2, BlockRemoved(HASHES[:5], "CPU"), BlockStored(HASHES[25:30], (), 0, "CPU"))
    _send(applier, 0, 3, BlockRemoved(HASHES[10:15], "GPU"), BlockRemoved(HASHES[15:17], None))
    _send(applier, 1, 1, BlockStored(HASHES[30:35], (), 0, "CPU"), BlockRemoved(HASHES[35:], "GPU"))


def _values(client: redis.Redis) -> dict[tuple[str, str], str]:
    """Every engine block's value as stored, by bucket key and field."""
    return {
        (key, field): value
        for key in client.scan_iter(f"{PREFIX}*")
        for field, value in client.hgetall(key).items()
    }


def _to_long_form(client: redis.Redis, every: int) -> int:
    """Write every `every`-th engine block in the long form, as builds before the short values
    wrote every value; returns how many changed."""
    changed = 0
    for n, ((key, field), value) in enumerate(sorted(_values(client).items())):
        long = Entry.parse(value).text
        if n % every == 0 and long != value:
            client.hset(key, field, long)
            changed += 1
    return changed


def _normalized(index: dict[str, object]) -> dict[str, object]:
    """A snapshot with its engine blocks' values in the form the scripts write them."""
    return {
        key: {f: Entry.parse(v).value for f, v in content.items()}
        if key.startswith(PREFIX) and isinstance(content, dict)
        else content
        for key, content in index.items()
    }


@pytest.fixture(params=MAPPING_KEYS, ids=["mapping-keys-on", "mapping-keys-off"])
def applier(request, redis_client: redis.Redis) -> Applier:
    return Applier(redis_client, chunk_size=7, mapping_keys=request.param)


def test_a_block_held_in_gpu_or_cpu_alone_is_its_std_alone(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _first(applier)

    stored = [
        redis_client.hget(keys.engine_blocks_key(POD, "0", 0, bucket), field)
        for bucket, field in map(engine_blocks.slot, (HASHES[0], HASHES[10], HASHES[20]))
    ]
    assert stored == [f"-{_std(0)}", f"{_std(10)}|GPU,CPU", _std(20)]
    assert stream_blocks(redis_client, POD, 0)[HASHES[0]] == f"{_std(0)}|CPU"
    found = engine_blocks.lookup(redis_client, [(POD, "0", HASHES[0]), (POD, "0", HASHES[20])])
    assert found == [Entry(_std(0), ("CPU",)), Entry(_std(20), ("GPU",))]
    bucket = keys.engine_blocks_key(POD, "0", 0, engine_blocks.slot(HASHES[20])[0])
    assert redis_client.object("encoding", bucket) == "listpack"


@pytest.mark.parametrize("every", [1, 2], ids=["written-before", "half-upgraded"])
def test_an_index_in_the_long_form_changes_as_a_new_one(
    every: int, applier: Applier, redis_client: redis.Redis
) -> None:
    """Every value in the long form (an index written before), or every other one (an index
    in the middle of its upgrade): it reads the same entries, and later events leave it as
    they leave an index written short, but for the values none of them touched."""
    _first(applier)
    read = {stream: stream_blocks(redis_client, POD, stream) for stream in (0, 1)}
    _then(applier)
    expected = snapshot(redis_client)
    redis_client.flushdb()
    _first(applier)

    assert _to_long_form(redis_client, every) > 0
    forms = {"|" in value for value in _values(redis_client).values()}
    assert forms == ({True} if every == 1 else {True, False})
    assert {stream: stream_blocks(redis_client, POD, stream) for stream in (0, 1)} == read
    _then(applier)

    assert _normalized(snapshot(redis_client)) == expected


def test_garbage_collection_rewrites_the_long_form_short(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _first(applier)
    expected = snapshot(redis_client)
    changed = _to_long_form(redis_client, 1)

    report = gc.collect_garbage(applier, 86400, registered=lambda: {POD}, now=100)

    assert report is not None and report.compacted == changed > 0
    assert report.ownerships == 0
    assert snapshot(redis_client, skip=("kvadmin:gc:",)) == expected
