"""Every process reads the published version from Redis at most every refresh interval, never
the database on the scoring path; only a Redis without a version sends one process there."""

import json

import pytest
from django.test import override_settings

from kvadmin.weights.active import (
    active_media_preference,
    active_weights,
    forget_cached_weights,
    publish,
)
from kvadmin.weights.config import KTHENA_DEFAULTS, WeightConfig
from kvadmin.weights.models import TierWeightsVersion
from scoring.keys import WEIGHTS_CONFIG_KEY, WEIGHTS_VERSION_KEY
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters
from scoring.weights import MediaPreference, TierWeights

DISK_HALF = WeightConfig.validated({"gpu": 1.0, "cpu": 0.8, "cpu_pinned": 0.8, "disk": 0.5})
ALWAYS_CHECK = override_settings(KVADMIN={"WEIGHTS_REFRESH_SECONDS": 0})


@pytest.mark.django_db(transaction=True)
def test_with_nothing_published_it_publishes_the_latest_saved_version(
    fresh_weights, redis_client
) -> None:
    TierWeightsVersion.objects.create(version=7, author="erin", config=DISK_HALF.to_json())
    active = active_weights()
    assert active.version == 7
    assert active.weights.weight_for("DISK") == 0.5
    assert redis_client.get(WEIGHTS_VERSION_KEY) == "7"
    assert json.loads(redis_client.get(WEIGHTS_CONFIG_KEY))["weights"]["disk"] == 0.5


def test_it_follows_the_published_version_without_the_database(fresh_weights, redis_client) -> None:
    """No django_db mark: any database query here would fail the test."""
    publish(3, DISK_HALF)
    forget_cached_weights()
    assert active_weights().version == 3
    redis_client.set(WEIGHTS_VERSION_KEY, 4)
    redis_client.set(WEIGHTS_CONFIG_KEY, json.dumps({"version": 4, **KTHENA_DEFAULTS.to_json()}))
    with ALWAYS_CHECK:
        active = active_weights()
    assert active.version == 4
    assert active.weights.weight_for("DISK") == 1.0


def test_between_checks_it_answers_from_memory(fresh_weights, redis_client) -> None:
    publish(3, DISK_HALF)
    redis_client.set(WEIGHTS_VERSION_KEY, 4)
    with override_settings(KVADMIN={"WEIGHTS_REFRESH_SECONDS": 60}):
        assert active_weights().version == 3


def test_publishing_never_moves_the_version_back(fresh_weights, redis_client) -> None:
    assert publish(5, DISK_HALF)
    assert not publish(4, KTHENA_DEFAULTS)
    assert redis_client.get(WEIGHTS_VERSION_KEY) == "5"
    assert publish(4, KTHENA_DEFAULTS, force=True)
    assert redis_client.get(WEIGHTS_VERSION_KEY) == "4"


def test_an_unusable_published_config_keeps_the_current_weights(
    fresh_weights, redis_client
) -> None:
    publish(3, DISK_HALF)
    redis_client.set(WEIGHTS_VERSION_KEY, 4)
    redis_client.set(WEIGHTS_CONFIG_KEY, json.dumps({"version": 4, "weights": {"gpu": 9}}))
    with ALWAYS_CHECK:
        assert active_weights().version == 3


def test_a_redis_outage_keeps_the_current_weights(fresh_weights, request) -> None:
    publish(3, DISK_HALF)
    request.getfixturevalue("redis_down")
    with ALWAYS_CHECK:
        assert active_weights().version == 3


def test_the_media_preference_follows_the_active_weights(fresh_weights) -> None:
    publish(3, WeightConfig.validated({"cpu": 0.9, "disk": 0.95}, fallback=0.5))
    assert active_media_preference() == MediaPreference.from_tier_weights(
        TierWeights({"cpu": 0.9, "disk": 0.95}, 0.5)
    )
    assert active_media_preference().best_first[:3] == ("gpu", "disk", "cpu")


def test_the_ttft_parameters_follow_the_published_version_too(fresh_weights, redis_client) -> None:
    """Another process saves a version with other TTFT parameters: this one switches to them
    at its next check, from Redis alone, and a bad parameter keeps what it has."""
    publish(3, DISK_HALF)
    slower = DISK_HALF.with_ttft(TtftParameters(first_token_s=0.2, kappa=0.5))
    redis_client.set(WEIGHTS_VERSION_KEY, 4)
    redis_client.set(WEIGHTS_CONFIG_KEY, json.dumps({"version": 4, **slower.to_json()}))
    with ALWAYS_CHECK:
        active = active_weights()
    assert (active.version, active.parameters) == (4, slower.ttft)
    broken = {"version": 5, **slower.to_json(), "ttft": {"kappa": -1}}
    redis_client.set(WEIGHTS_VERSION_KEY, 5)
    redis_client.set(WEIGHTS_CONFIG_KEY, json.dumps(broken))
    with ALWAYS_CHECK:
        assert active_weights().version == 4


def test_a_version_saved_before_parameters_were_versioned_means_the_defaults() -> None:
    old = WeightConfig.from_json({"weights": {"cpu": 0.5}, "fallback": 1.0, "notes": {}})
    assert old.ttft == DEFAULT_PARAMETERS
    assert WeightConfig.from_json(old.with_ttft(TtftParameters(kappa=3)).to_json()).ttft.kappa == 3
