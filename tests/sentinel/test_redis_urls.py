"""kvadmin/redis_urls.py reads every Redis URL once: a Sentinel URL becomes each library's own
Sentinel configuration, and a malformed one is an error that says what is wrong."""

import os
import subprocess
import sys

import pytest

from kvadmin import redis_urls
from kvadmin.redis_urls import InvalidRedisUrl, SentinelUrl
from tests.conftest import ROOT

URL = "redis+sentinel://:s3cret@h1:26380,h2/kv/2"


def test_it_reads_the_sentinels_the_primarys_name_and_the_database() -> None:
    assert redis_urls.parse_sentinel(URL) == SentinelUrl(
        (("h1", 26380), ("h2", 26379)), "kv", 2, None, "s3cret"
    )
    assert redis_urls.parse_sentinel("redis+sentinel://[::1]:5/kv").db == 0
    assert redis_urls.parse_sentinel("redis://127.0.0.1:6379/0") is None


def test_the_next_databases_stay_behind_the_same_sentinels() -> None:
    assert redis_urls.with_db(URL, 1) == "redis+sentinel://:s3cret@h1:26380,h2:26379/kv/3"
    assert redis_urls.with_db("redis://h:1/0", 3) == "redis://h:1/3"
    quoted = "redis+sentinel://:p%40ss@h:26379/kv/0"
    assert redis_urls.parse_sentinel(quoted).password == "p@ss"
    assert redis_urls.with_db(quoted, 1) == "redis+sentinel://:p%40ss@h:26379/kv/1"


def test_each_library_gets_its_own_sentinel_configuration() -> None:
    broker, options = redis_urls.celery_url(URL)
    assert broker == "sentinel://:s3cret@h1:26380/2;sentinel://:s3cret@h2:26379/2"
    assert options["master_name"] == "kv"
    host = redis_urls.channel_host(URL, socket_timeout=None)
    assert (host["sentinels"], host["master_name"], host["db"]) == (
        [("h1", 26380), ("h2", 26379)],
        "kv",
        2,
    )
    cache = redis_urls.cache(URL, {"SOCKET_TIMEOUT": 0.5})
    assert cache["LOCATION"] == ["redis://kv/2"]
    assert cache["OPTIONS"]["CLIENT_CLASS"] == "django_redis.client.SentinelClient"
    assert cache["OPTIONS"]["SENTINELS"] == [("h1", 26380), ("h2", 26379)]


def test_plain_urls_pass_through_unchanged() -> None:
    assert redis_urls.celery_url("redis://h:1/1") == ("redis://h:1/1", {})
    assert redis_urls.channel_host("redis://h:1/2") == {"address": "redis://h:1/2"}
    assert redis_urls.cache("redis://h:1/3", {})["LOCATION"] == "redis://h:1/3"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://h1:26379", "name the monitored primary"),
        ("redis+sentinel://h1:26379/kv/0/1", "name the monitored primary"),
        ("redis+sentinel:///kv/0", "a Sentinel address is empty"),
        ("redis+sentinel://h1,,h2/kv", "a Sentinel address is empty"),
        ("redis+sentinel://h1:port/kv", "is not a host:port"),
        ("redis+sentinel://h1:70000/kv", "is not a host:port"),
        ("redis+sentinel://h1/kv/zero", "is not a number"),
        ("redis+sentinel://h1/Main/0", "must be lower-case"),
        ("redis+sentinel://h1/kv/0?ssl=1", "takes no query"),
        ("sentinel://h1:26379/0", "is not one of"),
        ("localhost:6379", "is not a URL"),
    ],
)
def test_a_malformed_url_says_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(InvalidRedisUrl, match=says):
        redis_urls.check(url)


def test_messages_never_show_the_password() -> None:
    with pytest.raises(InvalidRedisUrl) as error:
        redis_urls.check("redis+sentinel://:s3cret@h1/kv/x")
    assert "s3cret" not in str(error.value)


def _settings(redis_url: str) -> subprocess.CompletedProcess:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.CELERY_BROKER_URL, s.CELERY_BROKER_TRANSPORT_OPTIONS['master_name'], "
        "s.CACHES['default']['OPTIONS']['CLIENT_CLASS'], "
        "s.CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]['master_name'])"
    )
    env = os.environ | {"DJANGO_SETTINGS_MODULE": "kvadmin.settings", "REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_settings_give_every_role_the_sentinel_configuration() -> None:
    done = _settings("redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/kv/0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "sentinel://127.0.0.1:26379/1;sentinel://127.0.0.1:26380/1",
        "kv",
        "django_redis.client.SentinelClient",
        "kv",
    ]


def test_a_malformed_redis_url_stops_the_start_naming_the_variable() -> None:
    done = _settings("redis+sentinel://127.0.0.1:26379")
    assert done.returncode != 0
    assert (
        "REDIS_URL: 'redis+sentinel://127.0.0.1:26379': name the monitored primary" in done.stderr
    )
