import os

from celery import Celery, signals
from click import Option

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")

app = Celery("kvadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task events on, as `worker -E` turns them on, and a "task-sent" event from every sender:
# monitors (Flower, `celery events`) then see kvadmin's tasks from sent to done.
app.conf.update(worker_send_task_events=True, task_send_sent_event=True)
app.autodiscover_tasks()


app.user_options["worker"].add(
    Option(("--without-ingest",), is_flag=True, default=False, help="Do not consume KV events.")
)
app.user_options["worker"].add(
    Option(("--without-load",), is_flag=True, default=False, help="Do not scrape engine load.")
)


@app.on_after_configure.connect
def _install_ingest(sender: Celery, **kwargs) -> None:
    from kvadmin.ingest.runner import IngestBootstep
    from kvadmin.load.runner import LoadBootstep

    sender.steps["worker"].add(IngestBootstep)
    sender.steps["worker"].add(LoadBootstep)


@signals.worker_init.connect
@signals.beat_init.connect
def _wait_for_redis(sender: object, **kwargs) -> None:
    """Start consuming only once Redis and every index group answer: one still loading its
    data would fail the ingest loop's first reads. A group that cannot hold its index (a
    replica, a cluster node, an ambiguous pattern) stops the process with the reason."""
    from django.conf import settings

    from kvadmin.conf import knob
    from kvadmin.engines.index_groups import require_ready
    from kvadmin.index.groups import index_groups
    from kvadmin.redis_server import wait_until_ready

    wait_until_ready(settings.REDIS_URL, knob("STARTUP_TIMEOUT"), "celery")
    for group in index_groups():
        wait_until_ready(group.url, knob("STARTUP_TIMEOUT"), "celery")
    require_ready("celery")


@signals.after_setup_logger.connect
def _quiet_routine_lines(**kwargs) -> None:
    from kvadmin.routine_logs import quiet_celery

    quiet_celery()


@app.task(name="kvadmin.ping")
def ping() -> str:
    """Answer with the worker's hostname: proves a worker is consuming the broker."""
    return ping.request.hostname or ""
