from django.db import migrations, models


def record_domain_names(apps, schema_editor):
    """VMs defined so far have domains named after them: keep finding them by that name."""
    VirtualMachine = apps.get_model("hosts", "VirtualMachine")
    VirtualMachine.objects.update(domain_name=models.F("name"))


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0018_host_fencing"),
    ]

    operations = [
        migrations.AddField(
            model_name="virtualmachine",
            name="domain_name",
            field=models.CharField(blank=True, default="", editable=False, max_length=64),
        ),
        migrations.RunPython(record_domain_names, migrations.RunPython.noop),
    ]
