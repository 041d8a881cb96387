"""Two operators save at the same moment, through the real server on the file-based SQLite
test database: exactly one save wins, the other answers 409 with what changed; never a 500,
never "database is locked"."""

import secrets
import threading
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission

from kvadmin.weights.models import TierWeightsVersion
from tests.conftest import Client
from tests.weights.forms import weights_form

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 8


def _operator(django_user_model, name: str) -> str:
    """A logged-in editor: the Cookie header of a session plus a CSRF secret."""
    user = django_user_model.objects.create_user(name, password=f"pw-{name}-123")
    user.user_permissions.add(Permission.objects.get(codename="change_tierweightsversion"))
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def _save(url: str, cookie: str, form: dict) -> tuple[int, str]:
    csrf = secrets.token_hex(16)  # 32 characters: a CSRF secret Django accepts as it is
    request = urllib.request.Request(
        f"{url}/weights/save/",
        data=urlencode(form, doseq=True).encode(),
        headers={
            "Cookie": f"{cookie}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
            "HX-Request": "true",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_concurrent_saves_give_one_success_and_one_409(
    asgi_server, version_one, django_user_model, fresh_weights
) -> None:
    cookies = [_operator(django_user_model, "erin"), _operator(django_user_model, "bob")]
    for round_ in range(ROUNDS):
        base = TierWeightsVersion.objects.order_by("-version").first().version
        forms = [
            weights_form(("gpu", "1"), ("cpu", f"0.{n}{round_ + 1}"), reason=f"op {n}")
            for n in (1, 2)
        ]
        assert all(form["base_version"] == str(base) for form in forms)
        start = threading.Barrier(2)
        answers: list[tuple[int, str]] = [(0, "")] * 2

        def save(n: int, form: dict, start: threading.Barrier, answers: list) -> None:
            start.wait(timeout=10)
            answers[n] = _save(asgi_server, cookies[n], form)

        threads = [
            threading.Thread(target=save, args=(n, forms[n], start, answers)) for n in (0, 1)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

        statuses = sorted(status for status, _ in answers)
        assert not any("database is locked" in body for _, body in answers), round_
        assert statuses == [200, 409], (round_, [body[:300] for _, body in answers])
        assert TierWeightsVersion.objects.order_by("-version").first().version == base + 1
        loser = next(body for status, body in answers if status == 409)
        assert f"after you loaded version {base}" in loser
