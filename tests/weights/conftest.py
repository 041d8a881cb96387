"""Fixtures for tier weights: an editor and a viewer (and their logged-in clients), a process
that forgets cached weights, and an index Redis that stops answering."""

from collections.abc import Iterator

import pytest
import redis
from django.contrib.auth.models import Permission, User

from kvadmin.redis_clients import index_client
from kvadmin.redis_server import free_port
from kvadmin.weights.active import forget_cached_weights
from kvadmin.weights.config import KTHENA_DEFAULTS
from kvadmin.weights.models import TierWeightsVersion


@pytest.fixture
def fresh_weights(redis_client: redis.Redis) -> Iterator[None]:
    """No weights published (the index database emptied) and none cached in this process, before
    and after the test. Tests that read or write the index database ask for `redis_client`."""
    forget_cached_weights()
    yield
    forget_cached_weights()


@pytest.fixture
def editor(django_user_model: type[User]) -> User:
    """Erin may change tier weights. (No password: tests log in with force_login.)"""
    user = django_user_model.objects.create_user("erin")
    user.user_permissions.add(Permission.objects.get(codename="change_tierweightsversion"))
    return user


@pytest.fixture
def viewer(django_user_model: type[User]) -> User:
    """Victor is logged in but may only look."""
    return django_user_model.objects.create_user("victor")


@pytest.fixture
def editing(client, editor, fresh_weights):
    """A test client logged in as Erin, the editor, with no weights cached."""
    client.force_login(editor)
    return client


@pytest.fixture
def viewing(client, viewer, fresh_weights):
    """A test client logged in as Victor, the viewer, with no weights cached."""
    client.force_login(viewer)
    return client


@pytest.fixture
def redis_down(settings) -> Iterator[None]:
    """The index Redis stops answering: a port nothing listens on."""
    index_client.cache_clear()
    settings.INDEX_REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    yield
    index_client.cache_clear()


@pytest.fixture
def migrated_before(version_one) -> None:
    """An install migrated before version 1 seeded kvadmin's physical defaults: its version 1
    is kthena's defaults (DISK at the 1.0 fallback), and stays so."""
    TierWeightsVersion.objects.filter(version=1).update(config=KTHENA_DEFAULTS.to_json())
