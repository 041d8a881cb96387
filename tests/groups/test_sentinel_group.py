"""A group named by its Sentinels (`redis+sentinel://`, kvadmin/redis_urls.py) passes the
start-up check, holds its model's index on the primary they name, and is read there."""

import pytest
import redis
from django.core.management import call_command

from kvadmin.index.groups import group_of
from scoring.hashing import block_hashes
from scoring.keys import block_key
from tests.groups.conftest import GROUPED, Configure
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.sentinel.topology import SentinelTopology

pytestmark = pytest.mark.django_db


def test_a_sentinel_watched_group_holds_and_serves_its_models_index(
    topology: SentinelTopology, configure_groups: Configure, redis_url: str, post_score, engines
) -> None:
    configure_groups({GROUPED: topology.url, "*": redis_url})
    call_command("check", databases=["default"])
    request = request_tokens(4)
    hold(group_of(MODEL).client(), PODS[2], request, ["GPU"] * 4)
    with redis.Redis(port=topology.primary(), decode_responses=True) as primary:
        assert primary.hgetall(block_key(MODEL, _first_block(request))).keys() == {PODS[2]}
    status, answer = post_score({"model": MODEL, "token_ids": request})
    assert status == 200 and answer["chosen"] == PODS[2] and answer["longest_match"] == 4


def _first_block(token_ids: list[int]) -> int:
    return block_hashes(token_ids)[0]
