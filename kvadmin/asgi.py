import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from kvadmin.api.fast_path import FastPath  # noqa: E402
from kvadmin.lifespan import Lifespan  # noqa: E402
from kvadmin.live.origins import SameOriginValidator  # noqa: E402
from kvadmin.routine_logs import quiet_access_log  # noqa: E402
from kvadmin.routing.tokenizer_warmup import warm_up  # noqa: E402
from kvadmin.static_files import StaticFiles  # noqa: E402
from kvadmin.websocket_urls import websocket_urlpatterns  # noqa: E402

quiet_access_log()

application = ProtocolTypeRouter(
    {
        # The scoring API's lean path in front of everything (kvadmin/api/fast_path.py), then
        # /static/ from the app and project static dirs (no CDN, no separate file server).
        "http": FastPath(StaticFiles(django_asgi_app)),
        # Same origin only: scheme, host and port (kvadmin/live/origins.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
# Each web process loads the configured tokenizers when it starts, before it serves.
application = Lifespan(application, warm_up)
