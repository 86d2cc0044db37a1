# Blazar's STARTING, UPDATING and TERMINATING are not statuses a Corral lease takes: its
# start, changes and end each run in one transaction, so no reader ever saw them. A row that
# holds one anyway (written by hand) takes the status its dates give it.

from django.db import migrations, models
from django.db.models.functions import Now


def settle_statuses(apps, schema_editor):
    Lease = apps.get_model("leases", "Lease")
    Lease.objects.filter(status="TERMINATING").update(status="TERMINATED")
    transient = Lease.objects.filter(status__in=["STARTING", "UPDATING"])
    transient.filter(start_date__gt=Now()).update(status="PENDING")
    transient.update(status="ACTIVE")


class Migration(migrations.Migration):

    dependencies = [
        ('leases', '0004_blazar_ids_and_host_properties'),
    ]

    operations = [
        migrations.RunPython(settle_statuses, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='lease',
            name='status',
            field=models.CharField(choices=[('PENDING', 'Pending'), ('ACTIVE', 'Active'), ('TERMINATED', 'Terminated'), ('ERROR', 'Error')], default='PENDING', max_length=16),
        ),
    ]
