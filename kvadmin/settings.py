"""kvadmin settings: one module, configured from the environment with safe local defaults.

Redis: REDIS_URL names the server (or the Sentinel-watched primary) and the logical database of
the kthena-compatible index; the Celery broker, the channel layer and the cache use the next
three databases.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from kvadmin import redis_urls
from kvadmin.conf import parse_bool, settings_knob

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("KVADMIN_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def envbool(name: str, default: str) -> bool:
    return parse_bool(name, os.environ.get(name, default))


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _redis_url(name: str, default: str) -> str:
    """A Redis URL variable, checked at start: a malformed one names itself."""
    url = os.environ.get(name, default)
    try:
        redis_urls.check(url)
    except redis_urls.InvalidRedisUrl as error:
        raise ImproperlyConfigured(f"{name}: {error}") from None
    return url


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


# SQLite with several writers (web workers, Celery, the CLI): WAL lets readers go on beside
# the one writer; a transaction takes the write lock when it begins (IMMEDIATE), because one
# that upgrades a read lock later fails with "database is locked" at once, whatever the
# timeout; and a writer waits up to `timeout` seconds for the lock instead of failing.
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}


def _database(url: str | None) -> dict:
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": SQLITE_OPTIONS}
    # File-based test database, so server and worker subprocesses in tests see the same data;
    # the test session names its own file so that concurrent sessions never share one.
    sqlite["TEST"] = {"NAME": os.environ.get("KVADMIN_TEST_DB", VAR_DIR / "test-kvadmin.sqlite3")}
    if not url:
        return sqlite | {"NAME": VAR_DIR / "kvadmin.sqlite3"}
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return sqlite | {"NAME": parts.path}
    if parts.scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": parts.path.lstrip("/"),
            "USER": parts.username or "",
            "PASSWORD": parts.password or "",
            "HOST": parts.hostname or "",
            "PORT": parts.port or "",
            "CONN_MAX_AGE": 60,
        }
    raise ValueError(f"DATABASE_URL: unsupported scheme {parts.scheme!r} (sqlite or postgresql)")


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", "false")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
CSRF_FAILURE_VIEW = "kvadmin.errors.csrf_failure"  # the 403 page, in the site's layout

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "channels",
    "kvadmin.dashboard",
    "kvadmin.engines",
    "kvadmin.api",
    "kvadmin.ingest",
    "kvadmin.routing",
    "kvadmin.weights",
    "kvadmin.residency",
    "kvadmin.fleet",
    "kvadmin.gateway",
    "kvadmin.metrics",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Redis down or stalled: 503 pages and API answers (kvadmin/unavailable.py).
    "kvadmin.unavailable.RedisOutageMiddleware",
]

ROOT_URLCONF = "kvadmin.urls"
ASGI_APPLICATION = "kvadmin.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "kvadmin.dashboard.context_processors.navigation",
                "django.template.context_processors.csp",
            ],
        },
    },
]

DATABASES = {"default": _database(os.environ.get("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# Redis: one server, separate logical databases per role. REDIS_URL names one server or a
# primary that Sentinel watches (redis+sentinel://h1:26379,h2:26379/<master>/<db>,
# kvadmin/redis_urls.py); every role follows a failover with its library's Sentinel support.
# Unset: the embedded redis-server that `make run` starts, off the standard port.
REDIS_URL = _redis_url("REDIS_URL", "redis://127.0.0.1:6390/0")
INDEX_REDIS_URL = REDIS_URL
# Request-path Redis clients (pages, API, cache) give up after this many seconds, so an outage
# answers 503 quickly; blocking readers (ingest loop, channel layer receive) never time out.
REDIS_TIMEOUT_SECONDS = float(os.environ.get("REDIS_TIMEOUT_SECONDS", "0.5"))

# Product knobs: KVADMIN_<NAME> environment variables override kvadmin.conf.CONFIG_DEFAULTS
# (converted to the default's type there).
# Read here rather than as knobs (settings need them), or by the test session.
SETTINGS_VARIABLES = {
    "KVADMIN_VAR_DIR", "KVADMIN_LOG_LEVEL", "KVADMIN_LOGIN_FAILURE_LIMIT",
    "KVADMIN_LOGIN_COOLOFF_MINUTES", "KVADMIN_TEST_DB", "KVADMIN_TEST_DATABASE",
}  # fmt: skip
KVADMIN = {
    name.removeprefix("KVADMIN_"): value
    for name, value in os.environ.items()
    if name.startswith("KVADMIN_") and name not in SETTINGS_VARIABLES
}

# Through Sentinel, kombu's and Celery's sentinel transports (sentinel:// URLs, the primary's
# name in the transport options). A CELERY_BROKER_URL of another broker (amqp://) is Celery's.
_BROKER = os.environ.get("CELERY_BROKER_URL", redis_urls.with_db(REDIS_URL, 1))
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = (
    redis_urls.celery_url(_redis_url("CELERY_BROKER_URL", _BROKER))
    if _BROKER.startswith(redis_urls.SENTINEL_SCHEME + "://")
    else (_BROKER, {})
)
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = CELERY_BROKER_TRANSPORT_OPTIONS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_BEAT_SCHEDULE: dict = {}
# Operations: garbage collection (runs when KVADMIN_GC_INTERVAL_SECONDS passed) and the
# dashboard's live tiles.
CELERY_BEAT_SCHEDULE["ingest-collect-garbage"] = {
    "task": "kvadmin.ingest.collect_garbage",
    "schedule": 60.0,
    "options": {"expires": 60.0},
}
# A switch of INDEX_VALUE_FORMAT rewrites the index's values in bounded steps.
CELERY_BEAT_SCHEDULE["index-rewrite-values"] = {
    "task": "kvadmin.index.rewrite_values",
    "schedule": 5.0,
    "options": {"expires": 5.0},
}
CELERY_BEAT_SCHEDULE["dashboard-publish-tiles"] = {
    "task": "kvadmin.dashboard.publish_tiles",
    "schedule": 2.0,
    "options": {"expires": 2.0},
}
# Engine health from evidence: probe each engine's replay socket and HTTP /health.
CELERY_IMPORTS = ["kvadmin.ingest.probes"]
_PROBE_PERIOD = settings_knob("PROBE_PERIOD_SECONDS", KVADMIN)
CELERY_BEAT_SCHEDULE["engines-probe"] = {
    "task": "kvadmin.ingest.probe_engines",
    "schedule": _PROBE_PERIOD,
    "options": {"expires": _PROBE_PERIOD},
}
# Calibration of the TTFT parameters from the engines' counters (kvadmin.weights.calibration).
CELERY_IMPORTS.append("kvadmin.weights.calibration")
_CALIBRATION_PERIOD = settings_knob("CALIBRATION_PERIOD_SECONDS", KVADMIN)
CELERY_BEAT_SCHEDULE["weights-calibrate"] = {
    "task": "kvadmin.weights.calibrate",
    "schedule": _CALIBRATION_PERIOD,
    "options": {"expires": _CALIBRATION_PERIOD},
}
# Residency browser: blocks per medium per pod for the /pods/ charts and live table.
CELERY_BEAT_SCHEDULE["residency-sample-pods"] = {
    "task": "kvadmin.residency.tasks.sample_pods",
    "schedule": 5.0,
    "options": {"expires": 5.0},
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 defaults to a 5 s socket timeout, which breaks blocking reads.
            "hosts": [
                redis_urls.channel_host(redis_urls.with_db(REDIS_URL, 2), socket_timeout=None)
            ],
            "capacity": 1000,
            "expiry": 30,
        },
    }
}

CACHES = {
    "default": redis_urls.cache(
        redis_urls.with_db(REDIS_URL, 3),
        {"SOCKET_TIMEOUT": REDIS_TIMEOUT_SECONDS, "SOCKET_CONNECT_TIMEOUT": REDIS_TIMEOUT_SECONDS},
    )
}
SESSION_ENGINE = "django.contrib.sessions.backends.db"

# Browser security. Every asset is vendored: scripts and styles come from this origin only, as
# static files (kvadmin's templates have no inline <script> or <style> blocks, and no inline
# event handlers: static/kvadmin/behaviours.js). The nonce is for Django's admin, whose
# templates mark their few inline blocks with it. Style attributes stay allowed: the bars and
# meters set their widths with them, and CSS cannot run script.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src-elem": [CSP.SELF, CSP.NONCE],
    "style-src-attr": [CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# TLS deployments (README, "Production"): all off by default so http://127.0.0.1 works.
# SECURE_PROXY_SSL_HEADER only behind a proxy that sets X-Forwarded-Proto itself.
if envbool("SECURE_PROXY_SSL_HEADER", "false"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "false")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = envbool("SECURE_COOKIES", "false")
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "false")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "false")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"handled_503": {"()": "kvadmin.routine_logs.HandledUnavailable"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("KVADMIN_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        "django.request": {"filters": ["handled_503"]},
    },
}

# Login throttling (django-axes): after KVADMIN_LOGIN_FAILURE_LIMIT failed logins of one
# username from one client address, that pair is refused until KVADMIN_LOGIN_COOLOFF_MINUTES
# after its last attempt. `manage.py axes_reset` (or axes_reset_username NAME) unlocks.
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as axes requires
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses locked-out pairs before any password check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("KVADMIN_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("KVADMIN_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # no banner in every process's log; failures and lockouts are still logged
