"""Placement and the hosts' storage pools: a VM goes only where its whole disk fits."""

import pytest

from hosts import jobs
from hosts.models import Host, JobKind, JobState
from hosts.operations import OPERATION_BY_KIND

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1024**3


def test_start_skips_hosts_whose_storage_pool_has_no_room_for_the_disk(
    sim_cluster, sim_hosts, make_vm, make_template
):
    small, also_small, roomy = sim_hosts
    Host.objects.filter(pk__in=[small.pk, also_small.pk]).update(storage_free_bytes=2 * GIB)
    Host.objects.filter(pk=roomy.pk).update(storage_free_bytes=50 * GIB)
    vm = make_vm(cluster=sim_cluster, template=make_template(memory_mb=128, disk_gb=10))

    job = jobs.submit(JobKind.START, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    vm.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert vm.host_id == roomy.pk
    assert "2.0 GiB free in the storage pool, 10 GiB needed" in str(job.result["placement"])


def test_start_fails_naming_the_storage_when_no_pool_has_room(
    sim_cluster, sim_hosts, make_vm, make_template
):
    Host.objects.filter(cluster=sim_cluster).update(storage_free_bytes=GIB)
    vm = make_vm(cluster=sim_cluster, template=make_template(memory_mb=128, disk_gb=5))

    job = jobs.submit(JobKind.START, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)

    job.refresh_from_db()
    assert (job.state, job.error_code) == (JobState.FAILED, "no_host")
    assert "1.0 GiB free in the storage pool, 5 GiB needed" in job.error_message
