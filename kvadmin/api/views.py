"""The JSON API for machine clients. Views stay thin: validate, call one service, answer."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from kvadmin.api.auth import api_token_required
from kvadmin.api.scopes import Scope
from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.index.streams import push_stream
from kvadmin.ingest import pushed
from kvadmin.ingest.decode import UndecodableBatch, decode_batch
from kvadmin.ingest.tasks import apply_pushed
from kvadmin.redis_clients import index_bytes_client, send_from_request

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@api_token_required(Scope.EVENTS_PUSH)
@require_POST
def push_events(request: HttpRequest, pod: str) -> JsonResponse:
    """Accept one msgpack KV event batch for `pod`; it is applied in order by a worker."""
    if request.content_type not in MSGPACK_TYPES:
        return _error(415, "Content-Type must be application/msgpack")
    limit = knob("PUSH_MAX_BYTES")
    declared = int(request.headers.get("Content-Length") or 0)
    if declared > limit:
        return _error(413, f"batch is {declared} bytes; the limit is {limit}")
    engine = Engine.objects.filter(pod=pod).first()
    if engine is None:
        return _error(404, f"no engine {pod!r} is registered")
    if not engine.enabled:
        return _error(409, f"engine {pod!r} is disabled: its batches are not applied")
    try:
        body = request.body
    except RequestDataTooBig:  # beyond DATA_UPLOAD_MAX_MEMORY_SIZE
        return _error(413, f"batch is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    if len(body) > limit:
        return _error(413, f"batch is {len(body)} bytes; the limit is {limit}")
    try:
        batch = decode_batch(body)
    except UndecodableBatch as error:
        return _error(400, f"undecodable batch: {error}")
    if (rank_error := pushed.rank_error(batch.rank, engine.dp_size)) is not None:
        return _error(400, rank_error)
    stream = push_stream(pod, batch.rank)
    enqueued = pushed.enqueue(index_bytes_client(), stream, engine.pk, body)
    send_from_request(apply_pushed, pod)
    return JsonResponse(
        {
            "accepted": True,
            "seq": enqueued.seq,
            "events": len(batch.events),
            "skipped": batch.skipped,
            "resync": enqueued.resync,
        },
        status=202,
    )
