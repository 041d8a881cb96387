"""Moving a model to another index group (README, "Index groups"): change the setting and
restart, the new group rebuilds from the engines' replay, `index_move_model` drains the old."""

import io

import pytest
import redis
from django.core.management import CommandError, call_command

from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.redis_server import RedisServer
from scoring.keys import POD_MODELS_KEY, block_key, stream_status_key
from tests.groups.conftest import GROUPED, GROUPED_POD, Configure
from tests.groups.ingested import publisher, register, worker
from tests.index import MODEL, std
from tests.ingest.blocks import stored
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_model_moves_to_its_new_group_and_leaves_the_old_one(
    primaries: list[RedisServer],
    configure_groups: Configure,
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    new = redis.Redis.from_url(primaries[0].url, decode_responses=True)
    configure_groups({"*": redis_url})
    with publisher() as engine:
        register(GROUPED_POD, MODEL, engine)
        engines = {GROUPED_POD: (MODEL, engine)}
        with worker(engines, "before"):
            seq = engine.publish([stored(1, 2)])
            wait_until(
                lambda: status.last_seq(redis_client, StreamId(GROUPED_POD, 0)) >= seq,
                what="applied on REDIS_URL",
            )
            configure_groups({GROUPED: primaries[0].url, "*": redis_url})
            with pytest.raises(CommandError, match="a worker still reads"):
                call_command("index_move_model", MODEL, "--to", GROUPED)
        assert redis_client.exists(block_key(MODEL, std(1)))  # the refusal removed nothing

        with worker(engines, "after"):  # restarted with the new setting
            wait_until(
                lambda: new.hgetall(block_key(MODEL, std(2))).keys() == {GROUPED_POD},
                what="the new group rebuilt from the engine's replay",
            )
            out = io.StringIO()
            call_command("index_move_model", MODEL, "--to", GROUPED, stdout=out)
    assert "2 block ownerships of Qwen/Qwen3-8B removed" in out.getvalue()
    assert not redis_client.exists(block_key(MODEL, std(1)), block_key(MODEL, std(2)))
    assert not redis_client.hexists(POD_MODELS_KEY, GROUPED_POD)
    assert not redis_client.exists(stream_status_key(GROUPED_POD, "0"))
    assert new.hgetall(block_key(MODEL, std(1))).keys() == {GROUPED_POD}
    new.close()


def test_the_move_refuses_a_group_the_setting_does_not_put_the_model_in(
    primaries: list[RedisServer], configure_groups: Configure, redis_url: str, db
) -> None:
    configure_groups({GROUPED: primaries[0].url, "*": redis_url})
    with pytest.raises(CommandError, match="puts 'Qwen/Qwen3-8B' in group Qwen/\\*"):
        call_command("index_move_model", MODEL, "--to", "*")
    with pytest.raises(CommandError, match="no index group 'llama-\\*'"):
        call_command("index_move_model", MODEL, "--to", "llama-*")
