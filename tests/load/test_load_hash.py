"""The one reader of the load hash: its staleness rule, and the replies it reads."""

from scoring import keys
from scoring.load_hash import from_reply, queue_read


def test_no_scrape_is_stale_and_an_old_one_too() -> None:
    assert from_reply([None, None, None, None]).stale(100.0, 3.0)
    assert from_reply(["1", "2", "0.5", "96.5"]).stale(100.0, 3.0)
    assert not from_reply(["1", "2", "0.5", "97.0"]).stale(100.0, 3.0)


def test_a_scrape_from_the_future_is_fresh_and_of_age_zero() -> None:
    load = from_reply([b"1", b"2", b"0.5", b"105.0"])
    assert load.age_seconds(100.0) == 0.0
    assert not load.stale(100.0, 3.0)


def test_unparsable_fields_read_as_absent(redis_client) -> None:
    redis_client.hset(keys.load_key("p"), mapping={"running": "x", "scraped_at": "99.0"})
    pipe = redis_client.pipeline(transaction=False)
    queue_read(pipe, "p")
    (reply,) = pipe.execute()
    load = from_reply(reply)
    assert (load.running, load.waiting, load.kv_usage, load.scraped_at) == (None, None, None, 99.0)
