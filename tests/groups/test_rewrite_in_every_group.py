"""The value-format rewrite runs in every index group: a switch of INDEX_VALUE_FORMAT rewrites
the matrix values on each group's primary, each with its own switch state beside its values."""

import pytest
import redis

from kvadmin.index.events import BlockStored
from kvadmin.ingest import tasks
from kvadmin.loop_guard import LoopGuard
from scoring.keys import VALUE_FORMAT_KEY, block_key
from tests.groups.conftest import DEFAULT_POD, GROUPED_POD
from tests.index import MODEL, OTHER_MODEL, IngestedIndex, block_tokens, engine_hash, std
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db


def _stored(block: int) -> BlockStored:
    tokens = list(block_tokens(block))
    return BlockStored([engine_hash(block)], tokens, block_size=16, medium="GPU")


def _legacy(client: redis.Redis, model: str, pod: str) -> bool:
    """The switch done on this primary, and the block's value there without its media."""
    done = client.hget(VALUE_FORMAT_KEY, "target") == "legacy"
    value = client.hget(block_key(model, std(1)), pod)
    return done and value is not None and "|" not in value


def test_a_switch_rewrites_the_values_of_every_group(
    two_models, grouped: redis.Redis, redis_client: redis.Redis, settings, monkeypatch
) -> None:
    monkeypatch.setattr(tasks, "_rewrite_guard", LoopGuard("value_format_rewrite", tasks.log))
    IngestedIndex(grouped).send(GROUPED_POD, _stored(1), model=MODEL)
    IngestedIndex(redis_client).send(DEFAULT_POD, _stored(1), model=OTHER_MODEL)
    assert "|" in grouped.hget(block_key(MODEL, std(1)), GROUPED_POD)  # tiered to begin with
    settings.KVADMIN = {**settings.KVADMIN, "INDEX_VALUE_FORMAT": "legacy"}

    wait_until(
        lambda: (
            tasks.rewrite_values()
            or (
                _legacy(grouped, MODEL, GROUPED_POD)
                and _legacy(redis_client, OTHER_MODEL, DEFAULT_POD)
            )
        ),
        what="both groups rewritten",
    )
