# What a reservation holds nowhere usable since a reserved host was lost (and from when), an
# allocation outliving its host (the capacity it is owed, placed again when room returns), and
# host properties that may carry operators. Stored properties keep their shape and meaning
# (a single value: at least, for cpus and memory_mb; equal, for a capability), so existing
# rows need no change; leases marked degraded before are checked again by the repair loop.

import django.db.models.deletion
import leases.properties
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('hosts', '0010_host_capabilities_flat'),
        ('leases', '0005_lease_statuses_that_occur'),
    ]

    operations = [
        migrations.AddField(
            model_name='reservation',
            name='missing',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='reservation',
            name='missing_since',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='allocation',
            name='host',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='allocations', to='hosts.host'),
        ),
        migrations.AlterField(
            model_name='reservation',
            name='host_properties',
            field=models.JSONField(blank=True, default=dict, validators=[leases.properties.validate_host_properties]),
        ),
    ]
