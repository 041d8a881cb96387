"""Events a consumer does not know yet (new engine versions: `BlockInactive`,
`TierBlocksCleared`, ...) are skipped, counted by tag on /metrics, and the tags kept per stream
are bounded: they are engine-chosen text."""

import msgspec
import pytest

from kvadmin.index import status
from kvadmin.index.events import UNKNOWN_TAGS_MAX
from kvadmin.index.streams import StreamId
from tests.ingest.conftest import spec_for
from tests.operations.conftest import POD, STREAM, value
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
STORE = {"type": "BlockStored", "block_hashes": [11], "token_ids": list(range(16))}
STORE |= {"block_size": 16, "medium": "GPU", "origin": "local", "session_id": "s-1"}


def _send(publisher, start_loop, redis_client, *batches: list[dict]) -> None:
    start_loop([spec_for(publisher)])
    wait_until(lambda: status.read_statuses(redis_client, [StreamId(POD, 0)])[0].connected)
    publisher.wait_for_subscribers()
    for events in batches:
        seq = publisher.publish_payload(msgspec.msgpack.encode({"ts": 1.0, "events": events}))
    wait_until(lambda: status.last_seq(redis_client, StreamId(POD, 0)) >= seq, what="applied")


def test_unknown_tags_are_counted_by_tag_and_the_rest_applies(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    inactive = {"type": "BlockInactive", "block_hashes": [11]}
    cleared = {"type": "TierBlocksCleared", "medium": "CPU"}
    _send(publisher, start_loop, redis_client, [STORE, inactive, cleared], [inactive])
    samples = scrape()

    tags = "kvadmin_ingest_unknown_event_tags_total"
    assert value(samples, tags, **STREAM, tag="BlockInactive") == 2
    assert value(samples, tags, **STREAM, tag="TierBlocksCleared") == 1
    errors = "kvadmin_ingest_decode_errors_total"
    assert value(samples, errors, **STREAM, reason="unknown_tag") == 3
    assert value(samples, "kvadmin_index_blocks", pod=POD, medium="GPU") == 1


def test_a_stream_names_a_bounded_number_of_tags(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    """Every event counts in the total; only the first distinct tags are named, and a tag that
    is not an event name (too long, not an identifier) never is."""
    batches = [[{"type": f"Future{n}"}] for n in range(UNKNOWN_TAGS_MAX + 4)]
    batches.append([{"type": "X" * 49}, {"type": "<script>"}, {"type": "Future0"}])
    _send(publisher, start_loop, redis_client, *batches)
    samples = scrape()

    named = {
        dict(labels)["tag"]: count
        for (name, labels), count in samples.items()
        if name == "kvadmin_ingest_unknown_event_tags_total"
    }
    assert named == {f"Future{n}": 2 if n == 0 else 1 for n in range(UNKNOWN_TAGS_MAX)}
    errors = value(samples, "kvadmin_ingest_decode_errors_total", **STREAM, reason="unknown_tag")
    assert errors == UNKNOWN_TAGS_MAX + 4 + 3
