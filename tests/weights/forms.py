"""What the weights form posts, built the way the page builds it."""

import secrets
import threading
import urllib.error
import urllib.request
from urllib.parse import urlencode

from django.contrib.auth.models import Permission
from django.test import Client

from kvadmin.weights.parameters import SCALARS, number_text
from kvadmin.weights.versions import current_version
from scoring.ttft import DEFAULT_PARAMETERS
from tests.waiting import patient

DEFAULT_ROWS = (("gpu", "1"), ("cpu", "0.8"), ("cpu_pinned", "0.8"))
HTMX = {"HTTP_HX_REQUEST": "true"}


def weights_form(
    *rows: tuple[str, str], fallback: str = "1", reason: str = "a test change", **extra: str
) -> dict[str, object]:
    """The draft with `rows` as (name, weight); base_version is the current version."""
    data: dict[str, object] = {
        "row": [f"k{index}" for index in range(len(rows))],
        "fallback": fallback,
        "reason": reason,
        "base_version": str(current_version().version),
        **extra,
    }
    for index, (name, weight) in enumerate(rows):
        data[f"name-k{index}"] = name
        data[f"weight-k{index}"] = weight
        data[f"note-k{index}"] = ""
    return data


def ttft_fields(speeds: tuple[tuple[str, str], ...] = (), **scalars: str) -> dict[str, object]:
    """The TTFT parameter fields as the page posts them: the defaults, but for `scalars`
    (field name -> text) and the model `speeds` ((model, tokens/s) rows)."""
    texts = {name: number_text(getattr(DEFAULT_PARAMETERS, name)) for name, _ in SCALARS}
    texts.update(scalars)
    data: dict[str, object] = {f"ttft-{name}": text for name, text in texts.items()}
    data["speed"] = [f"s{index}" for index in range(len(speeds))]
    for index, (model, speed) in enumerate(speeds):
        data[f"speed_model-s{index}"] = model
        data[f"speed_tps-s{index}"] = speed
    return data


def operator_cookie(django_user_model, name: str) -> str:
    """A logged-in editor: the Cookie header of a session plus a CSRF secret."""
    user = django_user_model.objects.create_user(name, password=f"pw-{name}-123")
    user.user_permissions.add(Permission.objects.get(codename="change_tierweightsversion"))
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def save_over_http(url: str, cookie: str, form: dict) -> tuple[int, str]:
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
        with urllib.request.urlopen(request, timeout=patient(30)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def save_at_once(saves: list[tuple[str, str, dict]]) -> list[tuple[int, str]]:
    """Each (server URL, session cookie, form) posted by its own thread, all released at the
    same moment; the answers in the same order."""
    start = threading.Barrier(len(saves))
    answers: list[tuple[int, str]] = [(0, "")] * len(saves)

    def save(n: int) -> None:
        start.wait(timeout=patient(10))
        answers[n] = save_over_http(*saves[n])

    threads = [threading.Thread(target=save, args=(n,)) for n in range(len(saves))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=patient(60))
    return answers
