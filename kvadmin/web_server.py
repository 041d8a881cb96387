"""The ASGI web server as the Procfile starts it: `python -m kvadmin.web_server [uvicorn options]`.

It runs WEB_WORKERS processes (uvicorn's --workers; 0, the default, is one per core) unless
the options name --workers. What a web process keeps in memory is kept current across
processes through Redis: tier weights (kvadmin/weights/active.py), API tokens and engines
(kvadmin/api/process_cache.py), the local tokenizers' guard; each process's live feed reads
the decision log itself (kvadmin/routing/tail.py).

Client addresses (the /metrics allow-list, logs) are the connection's peer unless
KVADMIN_TRUSTED_PROXIES names the proxies whose X-Forwarded-For and X-Forwarded-Proto may be
believed. uvicorn's own default believes them from 127.0.0.1, so any local process could claim
an allowed address; here the default believes nobody.
"""

import os
import sys

from kvadmin.conf import knob


def proxy_options(trusted: str) -> list[str]:
    """uvicorn's options for the configured proxies (comma-separated addresses or networks)."""
    if not trusted.strip():
        return ["--no-proxy-headers"]
    return ["--proxy-headers", "--forwarded-allow-ips", trusted.replace(" ", "")]


def worker_options(options: list[str], configured: int) -> list[str]:
    """uvicorn's --workers for `configured` processes (0: one per core), unless `options`
    already name it."""
    if any(option.split("=")[0] == "--workers" for option in options):
        return []
    return ["--workers", str(configured or os.cpu_count() or 1)]


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "kvadmin.asgi:application",
        *proxy_options(knob("TRUSTED_PROXIES")),
        *worker_options(sys.argv[1:], knob("WEB_WORKERS")),
        *sys.argv[1:],
    ]
    os.execv(sys.executable, command)


if __name__ == "__main__":
    main()
