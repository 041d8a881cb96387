"""Malformed input in the explain form is shown as a form error (200), never a 500."""

import pytest

from tests.index import MODEL
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def engine(db):
    """vllm-0, registered and serving MODEL."""
    return register("vllm-0.default")


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("messages", "[" * 100_000 + "]" * 100_000),
        ("token_ids", "[" * 100_000 + "]" * 100_000),
        ("messages", '[{"role": "user", "content": ' + "[" * 30 + "]" * 30 + "}]"),
    ],
    ids=["messages-nested-100000", "token-ids-nested-100000", "messages-nested-30"],
)
def test_deeply_nested_json_is_a_form_error(browsing, engine, redis_client, kind, text) -> None:
    response = browsing.post("/explain/", {"model": MODEL, "input": kind, "text": text})
    assert response.status_code == 200
    assert "nested deeper than" in response.text


def test_a_model_with_a_control_character_is_refused(browsing, engine, redis_client) -> None:
    response = browsing.post(
        "/explain/", {"model": MODEL + "\n", "input": "token_ids", "text": "1"}
    )
    assert response.status_code == 200 and "not one of the available choices" in response.text


def test_a_stored_model_name_breaking_the_rule_is_refused(browsing, engine, redis_client) -> None:
    """Registered before names were validated: listed, but explaining it says why not."""
    type(engine).objects.filter(pk=engine.pk).update(model="a\x1bb")
    response = browsing.post("/explain/", {"model": "a\x1bb", "input": "token_ids", "text": "1"})
    assert response.status_code == 200 and "control or invisible" in response.text
