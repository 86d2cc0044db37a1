import uuid

import django.db.models.deletion
from django.db import migrations, models


def give_images_uuids(apps, schema_editor):
    Image = apps.get_model("hosts", "Image")
    for image in Image.objects.filter(uuid__isnull=True):
        image.uuid = uuid.uuid4()
        image.save(update_fields=["uuid"])


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0021_guest_login"),
    ]

    operations = [
        # A unique UUID for rows that exist: added empty, filled, then made unique.
        migrations.AddField(
            model_name="image",
            name="uuid",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(give_images_uuids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="image",
            name="uuid",
            field=models.UUIDField(
                default=uuid.uuid4, editable=False, help_text="Its id in Glance's API.", unique=True
            ),
        ),
        migrations.AddField(
            model_name="virtualmachine",
            name="disk_image",
            field=models.ForeignKey(
                blank=True,
                help_text="Boots from this disk image instead of its template's.",
                limit_choices_to={"kind": "disk"},
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="vms",
                to="hosts.image",
            ),
        ),
        migrations.AddField(
            model_name="virtualmachine",
            name="user_data",
            field=models.TextField(
                blank=True,
                help_text="cloud-init user-data of its own (a #cloud-config, a script or any part "
                "cloud-init reads), given to the guest beside its template's and its user's keys.",
                max_length=65536,
            ),
        ),
    ]
