import os

from celery import Celery
from click import Option

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")

app = Celery("kvadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


app.user_options["worker"].add(
    Option(("--without-ingest",), is_flag=True, default=False, help="Do not consume KV events.")
)


@app.on_after_configure.connect
def _install_ingest(sender: Celery, **kwargs) -> None:
    from kvadmin.ingest.runner import IngestBootstep

    sender.steps["worker"].add(IngestBootstep)


@app.task(name="kvadmin.ping")
def ping() -> str:
    """Answer with the worker's hostname: proves a worker is consuming the broker."""
    return ping.request.hostname or ""
