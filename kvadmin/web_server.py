"""The ASGI web server as the Procfile starts it: `python -m kvadmin.web_server [uvicorn options]`.

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


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "kvadmin.asgi:application",
        *proxy_options(knob("TRUSTED_PROXIES")),
        *sys.argv[1:],
    ]
    os.execv(sys.executable, command)


if __name__ == "__main__":
    main()
