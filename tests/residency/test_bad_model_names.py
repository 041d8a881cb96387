"""A model name stored before names were validated (a newline in it) must not break the
pages listing it: /blocks/ and /pods/<pod>/ still answer, the name shown escaped."""

import re

import pytest

from tests.residency.conftest import register

pytestmark = pytest.mark.django_db

BAD_MODEL = "Qwen/Qwen3-8B\n<script>x</script>"  # a literal: the test is about this name
POD = "vllm-0.default"


@pytest.fixture
def pod_with_a_bad_model_name(index):
    """A registered pod whose model name holds a newline and markup, as stored before names were
    validated, with blocks in the index."""
    engine = register(POD, model="placeholder")
    type(engine).objects.filter(pk=engine.pk).update(model=BAD_MODEL)  # unvalidated, as old
    index.store(POD, range(3), model=BAD_MODEL)


@pytest.mark.parametrize("path", ["/blocks/", f"/pods/{POD}/", "/pods/", "/"])
def test_the_pages_still_answer(browsing, pod_with_a_bad_model_name, path) -> None:
    response = browsing.get(path)
    assert response.status_code == 200
    assert "<script>x</script>" not in response.text


def test_the_blocks_of_that_model_still_list_and_link(browsing, pod_with_a_bad_model_name) -> None:
    response = browsing.get("/blocks/", {"model": BAD_MODEL})
    assert response.status_code == 200
    assert "<script>x</script>" not in response.text
    links = re.findall(r'href="(/blocks/[^"?]+/\d+/)"', response.text)
    assert len(links) == 3 and "%0A" in links[0]
    block = browsing.get(links[0])
    assert block.status_code == 200 and "&lt;script&gt;" in block.text
