"""Malformed bodies to POST /api/v1/score: deeply nested or not UTF-8 is a 400 naming what is
wrong, never a 500; a model name with control characters is a 400 on the model field."""

import pytest

from kvadmin.routing import decisions
from tests.index import MODEL

pytestmark = pytest.mark.django_db

MALFORMED = [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested", id="nested-100000"),
    pytest.param(
        b'{"model": "' + b"x" * 4 + b'", "token_ids": ' + b"[" * 40 + b"]" * 40 + b"}",
        "nested",
        id="nested-40",
    ),
    pytest.param(b'{"model": "\xff\xfe", "token_ids": [1]}', "UTF-8", id="invalid-utf8"),
    pytest.param(b"\xef\xbb\xbf\xc3\x28", "JSON", id="garbage-bytes"),
]


@pytest.mark.parametrize(("body", "named"), MALFORMED)
def test_a_malformed_body_is_a_400_saying_why(post_score, engines, redis_client, body, named):
    status, answer = post_score(body)
    assert status == 400, answer
    assert named in answer["error"]
    assert decisions.recent(1) == []


@pytest.mark.parametrize(
    "model",
    [f"{MODEL}\n", "a\nb", "a\rb", "a\x00b", "a\x1b[31mb", "a\u2028b", "a\u200bb", " a", "m" * 256],
)
def test_a_model_name_that_is_not_printable_or_too_long_is_refused(
    post_score, engines, redis_client, model
) -> None:
    status, answer = post_score({"model": model, "token_ids": [1]})
    assert status == 400 and answer["field"] == "model", answer
    assert "model name" in answer["error"]
