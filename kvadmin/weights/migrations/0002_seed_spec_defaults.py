"""Version 1: kthena's defaults (compatibility.md 2.5), frozen here as a migration should be."""

from django.db import migrations

KTHENA_DEFAULTS = {
    "weights": {"cpu": 0.8, "cpu_pinned": 0.8, "gpu": 1.0},
    "fallback": 1.0,
    "notes": {},
}


def seed(apps, schema_editor) -> None:
    TierWeightsVersion = apps.get_model("weights", "TierWeightsVersion")
    TierWeightsVersion.objects.get_or_create(
        version=1,
        defaults={
            "author": "kvadmin",
            "reason": "kthena defaults (compatibility.md 2.5)",
            "config": KTHENA_DEFAULTS,
        },
    )


class Migration(migrations.Migration):
    dependencies = [("weights", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
