"""Two operators save at the same moment, through the real server on the file-based SQLite
test database: exactly one save wins, the other answers 409 with what changed; never a 500,
never "database is locked"."""

import pytest

from kvadmin.weights.models import TierWeightsVersion
from tests.weights.forms import operator_cookie, save_at_once, weights_form

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 8


def test_concurrent_saves_give_one_success_and_one_409(
    asgi_server, version_one, django_user_model, fresh_weights
) -> None:
    cookies = [
        operator_cookie(django_user_model, "erin"),
        operator_cookie(django_user_model, "bob"),
    ]
    for round_ in range(ROUNDS):
        base = TierWeightsVersion.objects.order_by("-version").first().version
        forms = [
            weights_form(("gpu", "1"), ("cpu", f"0.{n}{round_ + 1}"), reason=f"op {n}")
            for n in (1, 2)
        ]
        assert all(form["base_version"] == str(base) for form in forms)
        answers = save_at_once([(asgi_server, cookies[n], forms[n]) for n in (0, 1)])

        statuses = sorted(status for status, _ in answers)
        assert not any("database is locked" in body for _, body in answers), round_
        assert statuses == [200, 409], (round_, [body[:300] for _, body in answers])
        assert TierWeightsVersion.objects.order_by("-version").first().version == base + 1
        loser = next(body for status, body in answers if status == 409)
        assert f"after you loaded version {base}" in loser
