# The lease's UUID (the id OpenStack clients use) and the privacy of host properties.
# Existing leases get a UUID each before the column becomes unique.

import uuid

from django.db import migrations, models


def give_uuids(apps, schema_editor):
    Lease = apps.get_model("leases", "Lease")
    for lease in Lease.objects.only("pk").iterator():
        Lease.objects.filter(pk=lease.pk).update(uuid=uuid.uuid4())


class Migration(migrations.Migration):

    dependencies = [
        ("leases", "0003_reservation_host_properties_flat"),
    ]

    operations = [
        migrations.AddField(
            model_name="lease",
            name="uuid",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(give_uuids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="lease",
            name="uuid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
        migrations.CreateModel(
            name="HostProperty",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=64, unique=True)),
                ("private", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["name"],
                "default_permissions": (),
                "verbose_name_plural": "host properties",
            },
        ),
    ]
