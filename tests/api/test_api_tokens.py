"""API tokens: shown once, stored hashed, revocable."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.api.models import ApiToken

pytestmark = pytest.mark.django_db


def test_a_token_is_printed_once_and_stored_hashed() -> None:
    out = StringIO()
    call_command("api_token", "create", "--name", "gateway", stdout=out)
    token = out.getvalue().strip()
    row = ApiToken.objects.get(name="gateway")
    assert token.startswith("kva_")
    assert token not in (row.digest, row.hint)
    assert len(row.digest) == 64


def test_a_name_is_used_once() -> None:
    call_command("api_token", "create", "--name", "gateway", stdout=StringIO())
    with pytest.raises(CommandError, match="--name"):
        call_command("api_token", "create", "--name", "gateway", stdout=StringIO())


def test_revoking_deactivates_the_token() -> None:
    call_command("api_token", "create", "--name", "gateway", stdout=StringIO())
    call_command("api_token", "revoke", "--name", "gateway", stdout=StringIO())
    assert not ApiToken.objects.active().exists()
