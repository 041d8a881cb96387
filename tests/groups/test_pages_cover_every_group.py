"""The pages, the dashboard, search, /metrics and readiness read every index group: a pod of the
named group and one of the default group show side by side."""

import pytest
import redis

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.index.streams import StreamId
from kvadmin.metrics.collector import IndexCollector
from kvadmin.metrics.health import readiness
from kvadmin.redis_server import RedisServer
from kvadmin.residency.pods import pods_overview
from tests.groups.conftest import DEFAULT_POD, GROUPED_POD
from tests.index import MODEL, OTHER_MODEL, IngestedIndex, engine_hash, std

pytestmark = pytest.mark.django_db


def _fill(grouped: redis.Redis, redis_client: redis.Redis) -> None:
    """Block 1 and 2 of MODEL on the grouped pod in its group, block 3 of OTHER_MODEL on the
    default group's pod."""
    from kvadmin.index.events import BlockStored
    from tests.index import block_tokens

    def event(*blocks: int) -> BlockStored:
        tokens = [t for n in blocks for t in block_tokens(n)]
        hashes = [engine_hash(n) for n in blocks]
        return BlockStored(block_hashes=hashes, token_ids=tokens, block_size=16, medium="GPU")

    IngestedIndex(grouped).send(GROUPED_POD, event(1, 2), model=MODEL)
    IngestedIndex(redis_client).send(DEFAULT_POD, event(3), model=OTHER_MODEL)


def test_the_pods_page_lists_the_pods_of_both_groups(
    two_models, grouped, redis_client, client, django_user_model
) -> None:
    _fill(grouped, redis_client)
    counts = {pod.pod: pod.total for pod in pods_overview().pods}
    assert counts == {GROUPED_POD: 2, DEFAULT_POD: 1}
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))
    page = client.get("/pods/").content.decode()
    assert GROUPED_POD in page and DEFAULT_POD in page
    detail = client.get(f"/pods/{GROUPED_POD}/")
    assert detail.status_code == 200 and str(std(1)) in detail.content.decode()


def test_a_block_page_and_search_find_a_block_of_the_named_group(
    two_models, grouped, redis_client, client, django_user_model
) -> None:
    _fill(grouped, redis_client)
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))
    block = client.get(f"/blocks/{MODEL}/{std(1)}/")
    assert block.status_code == 200 and GROUPED_POD in block.content.decode()
    found = client.get("/search/", {"q": str(std(2))})
    assert found.status_code == 302 and found.url == f"/blocks/{MODEL}/{std(2)}/"
    listing = client.get("/blocks/", {"model": MODEL}).content.decode()
    assert str(std(1)) in listing and str(std(3)) not in listing


def test_the_dashboard_counts_the_engines_and_blocks_of_both_groups(
    two_models, grouped, redis_client
) -> None:
    _fill(grouped, redis_client)
    tiles = dashboard_tiles(redis_client)
    assert {engine.pod: engine.blocks for engine in tiles.engines} == {
        GROUPED_POD: 2,
        DEFAULT_POD: 1,
    }
    assert tiles.total_blocks == 3 and dict((m, n) for m, n, _ in tiles.media) == {"GPU": 3}


def test_metrics_count_the_blocks_of_both_groups(two_models, grouped, redis_client) -> None:
    _fill(grouped, redis_client)
    exposed = {family.name: family for family in IndexCollector().collect()}
    blocks = {s.labels["pod"]: s.value for s in exposed["kvadmin_index_blocks"].samples}
    assert blocks == {GROUPED_POD: 2, DEFAULT_POD: 1}
    assert exposed["kvadmin_index_pods"].samples[0].value == 2


def test_readiness_fails_naming_a_group_whose_primary_is_down(
    two_models, grouped, primaries: list[RedisServer]
) -> None:
    primaries[0].stop()
    ready, checks = readiness()
    assert not ready
    assert "Qwen/*" in checks["redis"]["error"]


def test_metrics_add_up_the_apply_latencies_each_group_counts(
    two_models, grouped, redis_client
) -> None:
    from kvadmin.index.events import EventBatch
    from kvadmin.metrics import recorder

    batch = [(0, EventBatch(ts=1.0, events=[]))]
    recorder.record_apply(grouped, StreamId(GROUPED_POD, 0), batch, 0.002)
    recorder.record_apply(redis_client, StreamId(DEFAULT_POD, 0), batch, 0.002)
    exposed = {family.name: family for family in IndexCollector().collect()}
    counts = {
        s.labels["pod"]: s.value
        for s in exposed["kvadmin_ingest_apply_duration_seconds"].samples
        if s.name.endswith("_count")
    }
    assert counts == {GROUPED_POD: 1, DEFAULT_POD: 1}


def test_a_purge_reaches_the_pods_group_and_leaves_the_others(
    two_models, grouped, redis_client
) -> None:
    from kvadmin.index.purge import purge_pod
    from scoring.keys import POD_MODELS_KEY

    _fill(grouped, redis_client)
    assert purge_pod(GROUPED_POD) == 2
    assert not grouped.hexists(POD_MODELS_KEY, GROUPED_POD)
    assert redis_client.hgetall(POD_MODELS_KEY) == {DEFAULT_POD: OTHER_MODEL}
