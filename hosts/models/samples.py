"""A host's, a cluster's and a VM's figures through the day and the month, for their charts:
one point a minute for the last day, one an hour (the minutes' average) for thirty days
(``hosts.samples``, ``hosts.cluster_samples``, ``hosts.vm_samples``)."""

from django.db import models


class _Figures(models.Model):
    host = models.ForeignKey("hosts.Host", on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(help_text="The start of the minute or hour the point stands for.")
    # None: no load was measured then (the host gave no CPU counters, or just one report).
    cpu_percent = models.FloatField(null=True)
    memory_given_mb = models.PositiveBigIntegerField(
        help_text="Memory of the VMs holding the host (running, starting, arriving…)."
    )
    memory_used_mb = models.PositiveBigIntegerField(help_text="Memory of the VMs running.")
    vms_running = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.host_id} at {self.at:%Y-%m-%d %H:%M}"


class HostSample(_Figures):
    """A host's figures in one minute: the first report read in it."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "at"], name="host_sample_minute")]


class HostHourSample(_Figures):
    """A host's figures in one hour: the average of its minutes (for VMs running, the
    most)."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "at"], name="host_sample_hour")]


class _ClusterFigures(models.Model):
    cluster = models.ForeignKey("hosts.Cluster", on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(help_text="The start of the minute or hour the point stands for.")
    # None: none of its hosts measured a load then.
    cpu_percent = models.FloatField(null=True, help_text="Its hosts' CPU in use, on average.")
    memory_given_mb = models.PositiveBigIntegerField(help_text="Memory its hosts give to VMs.")
    memory_capacity_mb = models.PositiveBigIntegerField(help_text="Its usable hosts' memory.")
    vms_up = models.PositiveIntegerField()
    vms_paused = models.PositiveIntegerField()
    vms_down = models.PositiveIntegerField()
    vms_changing = models.PositiveIntegerField(help_text="Starting, stopping, migrating…")
    vms_unknown = models.PositiveIntegerField()
    pool_vms_free = models.PositiveIntegerField(help_text="Its pools' running VMs nobody holds.")
    pool_vms_taken = models.PositiveIntegerField(help_text="Its pools' VMs someone holds.")

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.cluster_id} at {self.at:%Y-%m-%d %H:%M}"


class ClusterSample(_ClusterFigures):
    """A cluster's figures in one minute (``hosts.cluster_samples``)."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "at"], name="cluster_sample_minute")
        ]


class ClusterHourSample(_ClusterFigures):
    """A cluster's figures in one hour: the average of its minutes."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "at"], name="cluster_sample_hour")
        ]


class _VmFigures(models.Model):
    # No index of its own: the (vm, at) one leads with it.
    vm = models.ForeignKey(
        "hosts.VirtualMachine", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    at = models.DateTimeField(help_text="The start of the minute or hour the point stands for.")
    # None: not known then (the host does not say, or the first minute it was read running:
    # a rate needs two reads).
    cpu_percent = models.FloatField(null=True, help_text="Percent of the VM's vCPUs in use.")
    memory_used_mb = models.PositiveIntegerField(null=True)
    disk_read_bps = models.PositiveBigIntegerField(null=True)
    disk_write_bps = models.PositiveBigIntegerField(null=True)
    net_rx_bps = models.PositiveBigIntegerField(null=True)
    net_tx_bps = models.PositiveBigIntegerField(null=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.vm_id} at {self.at:%Y-%m-%d %H:%M}"


class VmSample(_VmFigures):
    """A running VM's figures in one minute: rates over the minute before its first report
    read in it (``hosts.vm_samples``)."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["vm", "at"], name="vm_sample_minute")]


class VmHourSample(_VmFigures):
    """A VM's figures in one hour: the average of its minutes."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["vm", "at"], name="vm_sample_hour")]
