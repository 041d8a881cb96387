"""Forget the demo (`make reset-demo`): the simulated pods' registrations and index entries.

Everything else stays: users, tier weights and their history, API tokens, engines registered
by hand, the decision log.
"""

from django.core.management.base import BaseCommand, CommandError

from kvadmin.engines.models import Engine
from kvadmin.engines.removal import remove_engine
from kvadmin.index.purge import forget_pod
from kvadmin.redis_clients import index_client
from kvadmin.stack import running_supervisor, web_url
from scoring.keys import DEMO_PODS_KEY


class Command(BaseCommand):
    help = "Remove the simulated fleet's engines and their index entries, and nothing else."

    def handle(self, *args, **options) -> None:
        if running_supervisor():
            raise CommandError(f"kvadmin is running at {web_url()}: stop it (Ctrl-C) first.")
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
