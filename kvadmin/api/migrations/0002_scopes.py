"""API tokens get scopes; tokens that existed before keep every scope.

New tokens default to `score` alone (least privilege). A token issued before this migration
could score, read decisions, read /metrics and push events for every pod: the data step gives
each existing token exactly those grants, so that upgrading breaks no running gateway, scraper
or engine. This is the non-breaking choice, not the safe one: after upgrading, narrow each
token in the admin or with `manage.py api_token scopes --name NAME --scope ...`.
"""

import kvadmin.api.scopes
from django.db import migrations, models

# Written out, not imported: a migration keeps meaning what it meant when it was written.
EVERY_SCOPE_EVERY_POD = "score decisions:read events:push metrics"


def grant_old_tokens_everything(apps, schema_editor) -> None:
    apps.get_model("api", "ApiToken").objects.update(scopes=EVERY_SCOPE_EVERY_POD)


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scopes",
            field=models.CharField(
                default="score",
                help_text="Space-separated: score, decisions:read, metrics, events:push (every "
                "pod) or events:push=POD,POD (those pods only).",
                max_length=2000,
                validators=[kvadmin.api.scopes.validate_grants],
            ),
        ),
        migrations.RunPython(grant_old_tokens_everything, migrations.RunPython.noop),
    ]
