"""Forget the demo (`make reset-demo`): the simulated pods' registrations and index entries.

Everything else stays: users, tier weights and their history, API tokens, engines registered
by hand, the decision log.

It runs while `make run` is stopped, and stopping `make run` stops its embedded Redis: that
one is then started here for the reset alone (on its port and data) and stopped after it. A
Redis named by REDIS_URL must be running; when it does not answer, one line says so.
"""

import contextlib
from collections.abc import Iterator

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.engines.removal import remove_engine
from kvadmin.index.purge import forget_pod
from kvadmin.redis_clients import index_client
from kvadmin.redis_server import embedded, wait_until_ready
from kvadmin.redis_urls import shown
from kvadmin.stack import running_supervisor, web_url
from scoring.keys import DEMO_PODS_KEY


@contextlib.contextmanager
def _index_redis() -> Iterator[None]:
    """The index's Redis for the reset: the embedded one started when it is not running."""
    server = embedded()
    if server is None or _answers(server.url):
        yield
        return
    try:
        server.start(timeout=knob("STARTUP_TIMEOUT"))
    except RuntimeError as error:
        raise CommandError(f"{error}: is another program on the port?") from None
    try:
        wait_until_ready(server.url, knob("STARTUP_TIMEOUT"), "reset-demo")
        yield
    finally:
        server.stop()


def _answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    with client:
        try:
            client.ping()
        except redis.BusyLoadingError:  # answers, with its data still loading
            return True
        except (redis.ConnectionError, redis.TimeoutError):
            return False
    return True


class Command(BaseCommand):
    help = "Remove the simulated fleet's engines and their index entries, and nothing else."

    def handle(self, *args, **options) -> None:
        if running_supervisor():
            raise CommandError(f"kvadmin is running at {web_url()}: stop it (Ctrl-C) first.")
        with _index_redis():
            try:
                self._forget()
            except (redis.ConnectionError, redis.TimeoutError) as error:
                raise CommandError(
                    f"Redis at {shown(settings.REDIS_URL)} did not answer ({error}): "
                    "start it (REDIS_URL names it), then run `make reset-demo` again."
                ) from None

    def _forget(self) -> None:
        client = index_client()
        pods = client.hgetall(DEMO_PODS_KEY)
        for pod, dp_size in sorted(pods.items()):
            if Engine.objects.filter(pod=pod).exists():
                entries = remove_engine(pod)
            else:  # unregistered already; entries may be left by a fleet that was killed
                entries = forget_pod(pod, int(dp_size))
            client.hdel(DEMO_PODS_KEY, pod)
            self.stdout.write(f"{pod}: unregistered, {entries} index entries removed")
        if not pods:
            self.stdout.write("No demo pods to forget.")
