"""The lean path and Django answer alike, in the real ASGI server behind a TLS proxy: repeated
Host, Authorization, Content-Length or X-Forwarded-Proto headers get 400 on both paths; the
lean path's answers carry the security headers of Django's own JSON answers, over HTTP and
HTTPS; under SECURE_SSL_REDIRECT a plain-HTTP score is Django's redirect."""

import json
from collections.abc import Iterator

import pytest

from kvadmin.api.models import ApiToken
from tests.api.raw_http import RawAnswer, open_request, read_answer
from tests.api.test_fast_path import engines  # noqa: F401  (a shared fixture)
from tests.conftest import start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import request_tokens
from tests.waiting import patient

pytestmark = pytest.mark.django_db(transaction=True)
PROMPT = json.dumps({"model": MODEL, "token_ids": request_tokens(2)}).encode()
SECURITY = (
    "x-frame-options",
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "strict-transport-security",
)


@pytest.fixture(scope="module")
def server(subprocess_env) -> Iterator[str]:
    env = subprocess_env | {"SECURE_PROXY_SSL_HEADER": "true", "SECURE_HSTS_SECONDS": "3600"}
    process, url = start_asgi_server(env)
    yield url
    stop_process(process)


@pytest.fixture
def token(engines) -> str:  # noqa: F811
    return ApiToken.issue("gateway", "score decisions:read")[1]


def _call(url: str, method: str, path: str, headers: list[str], body: bytes = b"") -> RawAnswer:
    lines = [f"{method} {path} HTTP/1.1", *headers]
    if body and not any(h.lower().startswith("content-length") for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    conn = open_request(url, "\n".join(lines), body)
    try:
        return read_answer(conn, timeout=patient(10))
    finally:
        conn.close()


def _score(url: str, token: str, *headers: str) -> RawAnswer:
    defaults = ["Content-Type: application/json", f"Authorization: Bearer {token}"]
    given = {h.split(":")[0].lower() for h in headers}
    kept = [h for h in defaults if h.split(":")[0].lower() not in given]
    if "host" not in given:
        kept.append("Host: 127.0.0.1")
    return _call(url, "POST", "/api/v1/score", [*kept, *headers], PROMPT)


def _decisions(url: str, token: str, *headers: str) -> RawAnswer:
    given = {h.split(":")[0].lower() for h in headers}
    kept = [f"Authorization: Bearer {token}"] if "authorization" not in given else []
    if "host" not in given:
        kept.append("Host: 127.0.0.1")
    return _call(url, "GET", "/api/v1/decisions?limit=1", [*kept, *headers])


REPEATED = {
    "host": ("Host: evil.example", "Host: 127.0.0.1"),
    "authorization": ("Authorization: Bearer kv_someone-else", "Authorization: Bearer {token}"),
    "x-forwarded-proto": ("X-Forwarded-Proto: http", "X-Forwarded-Proto: https"),
    "content-length": ("Content-Length: {length}", "Content-Length: {length}"),
}


@pytest.mark.parametrize("name", REPEATED)
def test_a_repeated_header_is_400_on_both_paths(server, token, name) -> None:
    headers = [h.format(token=token, length=len(PROMPT)) for h in REPEATED[name]]
    assert _score(server, token).status == 200
    assert _decisions(server, token).status == 200
    assert _score(server, token, *headers).status == 400, "the lean path"
    if name != "content-length":  # a GET without a body
        assert _decisions(server, token, *headers).status == 400, "Django's path"


@pytest.mark.parametrize("proto", ["http", "https"])
def test_the_lean_paths_security_headers_are_djangos(server, token, proto) -> None:
    lean = _score(server, token, f"X-Forwarded-Proto: {proto}")
    django = _decisions(server, token, f"X-Forwarded-Proto: {proto}")
    assert lean.status == django.status == 200
    wanted = [name for name in SECURITY if proto == "https" or name != "strict-transport-security"]
    assert all(name in django.headers for name in wanted), django.headers
    assert {n: lean.headers.get(n) for n in SECURITY} == {
        n: django.headers.get(n) for n in SECURITY
    }


@pytest.fixture(scope="module")
def redirecting_server(subprocess_env) -> Iterator[str]:
    process, url = start_asgi_server(subprocess_env | {"SECURE_SSL_REDIRECT": "true"})
    yield url
    stop_process(process)


def test_a_plain_http_score_is_djangos_redirect_under_ssl_redirect(
    redirecting_server,
    engines,  # noqa: F811
) -> None:
    token = ApiToken.issue("gateway")[1]
    answer = _score(redirecting_server, token)
    assert answer.status == 301
    assert answer.headers["location"] == ["https://127.0.0.1/api/v1/score"]
