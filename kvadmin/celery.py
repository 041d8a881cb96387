import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")

app = Celery("kvadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="kvadmin.ping")
def ping() -> str:
    """Answer with the worker's hostname: proves a worker is consuming the broker."""
    return ping.request.hostname or ""
