"""Events carry their scope keys (project/live/event_scopes.py); the events already kept get theirs."""

from django.db import migrations, models

SCOPE_FIELDS = {"vm": "vm_id", "cluster": "cluster_id", "pool": "pool_id", "lease": "lease_id"}


def fill_scope_keys(apps, schema_editor):
    Event = apps.get_model("project", "Event")
    batch = []
    for event in Event.objects.all().iterator(chunk_size=2000):
        keys = ["system"]
        keys += [
            f"{scope}:{getattr(event, field)}"
            for scope, field in SCOPE_FIELDS.items()
            if getattr(event, field) is not None
        ]
        if event.user_id is not None:
            keys.append(f"user:{event.user_id}")
        event.scope_keys = keys
        batch.append(event)
        if len(batch) >= 2000:
            Event.objects.bulk_update(batch, ["scope_keys"])
            batch = []
    Event.objects.bulk_update(batch, ["scope_keys"])


class Migration(migrations.Migration):
    dependencies = [
        ("project", "0008_ssh_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="scope_keys",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(fill_scope_keys, migrations.RunPython.noop),
    ]
