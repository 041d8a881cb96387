"""`api_token` and the admin: scopes chosen at creation (score only by default), shown by
`list`, changed by `scopes` and in the admin; tokens from before scopes keep every scope."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from kvadmin.api.models import ApiToken
from kvadmin.api.scopes import Scope


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_without_scope_a_token_may_only_score_and_says_so() -> None:
    out, err = _run("create", "--name", "gateway")

    assert out.strip().startswith("kva_") and len(out.strip().split()) == 1
    assert "score" in err and "default" in err
    grants = ApiToken.objects.get(name="gateway").grants
    assert grants.allows(Scope.SCORE)
    assert not any(grants.allows(s, "vllm-0.default") for s in Scope if s is not Scope.SCORE)


@pytest.mark.django_db
def test_scopes_are_chosen_at_creation_and_listed() -> None:
    _run(
        "create",
        "--name",
        "engines",
        "--scope",
        "events:push=vllm-1.default,vllm-0.default",
        "--scope",
        "metrics",
    )
    row = ApiToken.objects.get(name="engines")
    assert row.scopes == "events:push=vllm-0.default,vllm-1.default metrics"
    assert row.grants.allows(Scope.EVENTS_PUSH, "vllm-1.default")
    assert not row.grants.allows(Scope.EVENTS_PUSH, "vllm-2.default")
    assert not row.grants.allows(Scope.SCORE)

    listing, _ = _run("list")
    assert "engines" in listing and "events:push=vllm-0.default,vllm-1.default metrics" in listing


@pytest.mark.django_db
@pytest.mark.parametrize(
    "scope", ["admin", "score=vllm-0.default", "events:push=", "events:push=Not_A_Pod", ""]
)
def test_a_bad_scope_creates_nothing(scope: str) -> None:
    with pytest.raises(CommandError, match="--scope"):
        _run("create", "--name", "x", "--scope", scope)
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_scopes_can_be_replaced() -> None:
    _run("create", "--name", "gateway")
    out, _ = _run("scopes", "--name", "gateway", "--scope", "score", "--scope", "decisions:read")
    assert ApiToken.objects.get(name="gateway").scopes == "score decisions:read"
    assert "score decisions:read" in out


@pytest.mark.django_db
def test_the_admin_shows_and_edits_scopes(admin_client) -> None:
    row, _ = ApiToken.issue("gateway")
    assert "score" in admin_client.get("/admin/api/apitoken/").content.decode()
    url = f"/admin/api/apitoken/{row.pk}/change/"
    form = {"name": "gateway", "revoked_at_0": "", "revoked_at_1": ""}

    refused = admin_client.post(url, form | {"scopes": "score superuser"})
    assert refused.status_code == 200 and "is not a scope" in refused.content.decode()
    assert admin_client.post(url, form | {"scopes": "metrics score"}).status_code == 302

    assert ApiToken.objects.get(pk=row.pk).scopes == "score metrics"


@pytest.mark.django_db(transaction=True)
def test_tokens_from_before_scopes_keep_every_scope() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("api", "0001_initial")])
    old_model = executor.loader.project_state([("api", "0001_initial")]).apps.get_model(
        "api", "ApiToken"
    )
    old_model.objects.create(name="old", digest="0" * 64, hint="kva_old")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("api"))

    grants = ApiToken.objects.get(name="old").grants
    assert all(grants.allows(scope, "any-0.pod") for scope in Scope)
    assert ApiToken.issue("new")[0].scopes == "score"
