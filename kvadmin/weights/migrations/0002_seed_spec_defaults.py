"""Version 1 of a new install: kvadmin's physical defaults (scoring.weights.KVADMIN_WEIGHTS),
frozen here as a migration should be.

Every medium of the media table is configured in physical order: DISK and the other storage
tiers weigh less than host memory, so the index's values (compatibility.md 5.4) name host
memory before disk and the `ttft` policy prices a disk reload as one (issue 33). kthena scores
them identically once the export is applied: its fallback stays 1.0.

An install migrated before this seeded kthena's defaults here; a migration that has run never
runs again, so its active version stays what it is. /weights/ offers it the physical defaults
as a draft ("Start from kvadmin's defaults") while its version prices a slower tier above a
faster one.
"""

from django.db import migrations

PHYSICAL_DEFAULTS = {
    "weights": {
        "cpu": 0.8,
        "cpu_pinned": 0.8,
        "cpu_tier1": 0.8,
        "cpu_tier2": 0.4,
        "disk": 0.4,
        "external": 0.2,
        "fs": 0.4,
        "gpu": 1.0,
        "obj": 0.2,
        "shared_storage": 0.2,
        "storage": 0.4,
    },
    "fallback": 1.0,
    "notes": {},
}


def seed(apps, schema_editor) -> None:
    TierWeightsVersion = apps.get_model("weights", "TierWeightsVersion")
    TierWeightsVersion.objects.get_or_create(
        version=1,
        defaults={
            "author": "kvadmin",
            "reason": "kvadmin's physical defaults (storage tiers below host memory)",
            "config": PHYSICAL_DEFAULTS,
        },
    )


class Migration(migrations.Migration):
    dependencies = [("weights", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
