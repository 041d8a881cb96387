"""The pod's page names the event types its engines send that kvadmin does not know yet, so an
operator sees a new engine version coming; nothing is shown while every type is known."""

import msgspec
import pytest

from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import decode_batch
from tests.index import MODEL, NOW
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db
POD = "vllm-0.default"


def _publish(redis_client, rank: int, seq: int, events: list[dict]) -> None:
    """One engine payload, decoded and applied as the ingest loop does."""
    batch = decode_batch(msgspec.msgpack.encode({"ts": NOW, "events": events}))
    Applier(redis_client).apply_batch(POD, MODEL, "vllm", rank, seq, batch, now=NOW)


def test_unknown_event_types_are_listed_per_stream(browsing, index, redis_client) -> None:
    register(POD, dp_size=2)
    index.store(POD, range(2))
    _publish(redis_client, 0, 1, [{"type": "BlockInactive", "block_hashes": [1]}] * 2)
    _publish(redis_client, 1, 0, [{"type": "TierBlocksCleared", "medium": "CPU"}])

    html = browsing.get(f"/pods/{POD}/").text
    section = html.split('id="unknown-tags"', 1)[1].split("</section>", 1)[0]

    assert "<td>rank 0</td><td><code>BlockInactive</code></td><td>2</td>" in section
    assert "<td>rank 1</td><td><code>TierBlocksCleared</code></td><td>1</td>" in section
    assert "style=" not in section and "<script" not in section


def test_nothing_is_shown_while_every_event_type_is_known(browsing, index) -> None:
    register(POD)
    index.store(POD, range(2))
    assert 'id="unknown-tags"' not in browsing.get(f"/pods/{POD}/").text
