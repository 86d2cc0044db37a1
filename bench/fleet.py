"""The rows benchmark scenarios stand on, shared by them: a fleet of clusters, hosts, a
template and VMs (``make_fleet``), a pool of VM rows (``make_pool``) and their removal
(``remove_pools``). Imports no scenario module: the scenarios import it."""

from itertools import count

from django.contrib.auth import get_user_model
from django_q.models import OrmQ

from hosts.models import Cluster, Host, Template, VirtualMachine, VmStatus
from pools.models import VmPool

User = get_user_model()
_serial = count(1)


def make_fleet(vms: int, clusters: int = 10) -> tuple[list[Cluster], Template]:
    """A fleet of rows only (no host is reachable): every VM, host, cluster and template before
    is deleted, then ``clusters`` clusters, a host per 20 VMs (at least one per cluster), one
    template and ``vms`` VMs spread over the clusters."""
    VirtualMachine.objects.all().delete()
    Host.objects.all().delete()
    Cluster.objects.all().delete()
    Template.objects.all().delete()
    template = Template.objects.create(name="bench", vcpus=1, memory_mb=1024, disk_gb=10)
    made = Cluster.objects.bulk_create(Cluster(name=f"c{i}") for i in range(clusters))
    Host.objects.bulk_create(
        Host(name=f"h{i}", cluster=made[i % clusters], uri=f"qemu+ssh://root@h{i}/system")
        for i in range(max(clusters, vms // 20))
    )
    VirtualMachine.objects.bulk_create(
        VirtualMachine(
            name=f"vm{i}",
            cluster=made[i % clusters],
            template=template,
            vcpus=1,
            memory_mb=1024,
            disk_gb=10,
        )
        for i in range(vms)
    )
    return made, template


def make_pool(vms: int, up: int, taken: int = 0, prestarted: int = 0, cluster=None) -> VmPool:
    """A pool of ``vms`` VM rows: ``taken`` held by another user, then ``up`` prestarted
    (Up, unassigned), the rest Down."""
    tag = f"poolbench{next(_serial)}"
    cluster = cluster or Cluster.objects.create(name=tag)
    template = Template.objects.create(name=tag, vcpus=1, memory_mb=128, disk_gb=1)
    pool = VmPool.objects.create(
        name=tag,
        cluster=cluster,
        template=template,
        size=vms,
        prestarted_vms=prestarted,
        max_user_vms=vms,
    )
    holder, _ = User.objects.get_or_create(username="poolbench-holder")
    statuses = [VmStatus.UP] * taken + [VmStatus.UP] * up + [VmStatus.DOWN] * (vms - taken - up)
    VirtualMachine.objects.bulk_create(
        (
            VirtualMachine(
                name=pool.vm_name(i + 1),
                cluster=cluster,
                template=template,
                pool=pool,
                pool_index=i + 1,
                owner=holder if i < taken else None,
                status=status,
                vcpus=1,
                memory_mb=128,
                disk_gb=1,
            )
            for i, status in enumerate(statuses)
        ),
        batch_size=2000,
    )
    return pool


def remove_pools(pools: list[VmPool]) -> None:
    """Delete the pools, their VMs, templates and clusters, and every queued task."""
    clusters = {pool.cluster_id for pool in pools}
    templates = {pool.template_id for pool in pools}
    VirtualMachine.objects.filter(pool__in=pools).delete()
    VmPool.objects.filter(pk__in=[pool.pk for pool in pools]).delete()
    Template.objects.filter(pk__in=templates).delete()
    Cluster.objects.filter(pk__in=clusters).delete()
    OrmQ.objects.all().delete()
