"""A hundred users start their VMs at the same moment, through a real web server, on a
cluster with room for eighty; a real task cluster runs the start jobs.

Two simulated hosts take VMs (the third is in maintenance); each has 3072 MiB and the VMs
76 MiB, so the Memory filter lets exactly 40 on each (40 x 76 = 3040). Every request is
answered with its job, eighty VMs come up, no host is given more memory than it has (as the
database counts it and as the hosts themselves report), and every other start fails saying
that no host has room for it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import libvirt
import pytest
from django.contrib.auth import get_user_model

from hosts import driver
from hosts.driver.libvirt.connection import connection
from hosts.models import Host, HostStatus, Job, JobKind, JobState, VirtualMachine, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from hosts.services import put_in_maintenance
from hosts.usage import load, with_usage
from project.access.grants import grant_role
from project.models import Role
from tests.conftest import unique, wait_until
from tests.reliability.crowd import POSTGRES_ONLY, not_json, post_all, scaled

pytestmark = [pytest.mark.slow, pytest.mark.postgres, POSTGRES_ONLY]

User = get_user_model()
HOST_MEMORY_MB = 3072  # what libvirt's test driver reports for each simulated host
FIT_PER_HOST = scaled(40)
# The VM size that lets exactly FIT_PER_HOST VMs in a host: 76 MiB for 40 (40 x 76 = 3040,
# 41 x 76 = 3116).
VM_MEMORY_MB = HOST_MEMORY_MB // FIT_PER_HOST
VMS = scaled(100)  # for 2 x FIT_PER_HOST = 80 places
SETTLE_S = 240
CLUSTER_ENV = {
    "Q_WORKERS": "4",
    # A loaded 2-core machine must not pass for a dead worker or a stuck scheduler.
    "CORRAL_JOB_HEARTBEAT_TIMEOUT": "60",
    "CORRAL_SCHEDULER_LOCK_TIMEOUT": "60",
}


def _owned_vms(cluster, template, count: int) -> list[VirtualMachine]:
    """``count`` stopped VMs, each owned by its own user (UserVmManager on it)."""
    users = User.objects.bulk_create(User(username=unique("starter")) for _ in range(count))
    role = Role.objects.get(name="UserVmManager")
    vms = []
    for user in users:
        vm = VirtualMachine.objects.create(
            name=unique("crowd"),
            cluster=cluster,
            template=template,
            owner=user,
            vcpus=template.vcpus,
            memory_mb=template.memory_mb,
            disk_gb=template.disk_gb,
        )
        grant_role(role, vm, user=user)
        vms.append(vm)
    return vms


def _report(vms, workers, server):
    def text() -> str:
        jobs = Job.objects.filter(vm__in=vms).exclude(state=JobState.SUCCEEDED).order_by("pk")
        lines = [f"{j.pk} {j.vm_id} {j.state} {j.error_code} {j.error_message}" for j in jobs]
        statuses = Counter(
            VirtualMachine.objects.filter(pk__in=[vm.pk for vm in vms]).values_list("status")
        )
        return (
            f"jobs not succeeded: {lines[:30]}\nVMs: {statuses}\n"
            f"{workers.log()[-3000:]}\n{server.log()[-1500:]}"
        )

    return text


def _running_domains(uri: str, corral_uuids: set[str]) -> dict[str, int]:
    """UUID -> memory (MiB) of the running domains of Corral's VMs, as the host reports."""
    conn = connection(uri)
    running = conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
    return {
        dom.UUIDString(): dom.maxMemory() // 1024
        for dom in running
        if dom.UUIDString() in corral_uuids
    }


def test_a_hundred_starts_at_once_fill_the_cluster_to_its_memory_and_refuse_the_rest(
    sim_hosts, make_template, task_cluster, web_server
):
    usable, spare = sim_hosts[:2], sim_hosts[2]
    cluster = spare.cluster
    put_in_maintenance(spare)
    assert [h.memory_mb for h in usable] == [HOST_MEMORY_MB] * 2
    template = make_template(vcpus=1, memory_mb=VM_MEMORY_MB, disk_gb=1, cluster=cluster)
    vms = _owned_vms(cluster, template, VMS)
    places = 2 * FIT_PER_HOST
    workers = task_cluster(**CLUSTER_ENV)
    server = web_server()

    answers = post_all(server.url, [(vm.owner, f"/api/vms/{vm.pk}/start/", None) for vm in vms])

    assert not_json(answers) == []
    assert [(a.path, a.status, a.body) for a in answers if a.status != 202] == []
    assert [a.body["kind"] for a in answers] == [JobKind.START] * VMS
    assert [a.body["vm"] for a in answers] == [vm.pk for vm in vms]
    assert [a.body["requested_by"] for a in answers] == [vm.owner.username for vm in vms]
    wait_until(
        lambda: not Job.objects.filter(vm__in=vms, state__in=ACTIVE_JOB_STATES).exists(),
        timeout=SETTLE_S,
        interval=0.5,
        message=_report(vms, workers, server),
    )

    jobs = {job.vm_id: job for job in Job.objects.filter(vm__in=vms)}
    assert sorted(jobs) == sorted(vm.pk for vm in vms)  # one start job per VM, no more
    assert {a.body["id"] for a in answers} == {job.pk for job in jobs.values()}
    states = Counter(job.state for job in jobs.values())
    assert states == {JobState.SUCCEEDED: places, JobState.FAILED: VMS - places}, _report(
        vms, workers, server
    )()
    by_pk = {vm.pk: vm for vm in VirtualMachine.objects.filter(pk__in=[v.pk for v in vms])}
    refused = [job for job in jobs.values() if job.state == JobState.FAILED]
    left = HOST_MEMORY_MB - FIT_PER_HOST * VM_MEMORY_MB  # on each full host
    for job in refused:
        vm = by_pk[job.vm_id]
        assert job.error_code == "no_host", job.error_message
        assert job.error_message.startswith(
            f"No host can run {vm.name} in cluster {cluster.name}: "
        ), job.error_message
        for host in usable:
            full = f"{host.name}: {left} MiB free, {VM_MEMORY_MB} MiB needed (Memory)"
            assert full in job.error_message, job.error_message
        assert f"{spare.name}: host is maintenance (HostStatus)" in job.error_message
        assert job.result["placement"]["outcome"] == "no_host"
        assert (vm.status, vm.host_id, vm.power_state) == (VmStatus.DOWN, None, ""), vm.name

    placed = [by_pk[job.vm_id] for job in jobs.values() if job.state == JobState.SUCCEEDED]
    assert {vm.status for vm in placed} == {VmStatus.UP}
    assert Counter(vm.host_id for vm in placed) == {h.pk: FIT_PER_HOST for h in usable}

    # What the database counts on each host: given memory within the host's size.
    for host in with_usage(Host.objects.filter(cluster=cluster).select_related("cluster")):
        memory, _ = load(host)
        assert memory.used <= memory.capacity, (host.name, memory)
    assert Host.objects.get(pk=spare.pk).status == HostStatus.MAINTENANCE

    # What the hosts themselves run: Corral's domains there, within each host's memory.
    uuids = {str(vm.uuid): vm for vm in by_pk.values()}
    running = {host.name: _running_domains(host.uri, set(uuids)) for host in sim_hosts}
    assert {name: len(domains) for name, domains in running.items()} == {
        usable[0].name: FIT_PER_HOST,
        usable[1].name: FIT_PER_HOST,
        spare.name: 0,
    }
    for host in usable:
        report = driver.host_report(host.uri)
        assert sum(running[host.name].values()) <= report.memory_mb, host.name
    where = defaultdict(set)
    for host in sim_hosts:
        for uuid in running[host.name]:
            where[uuid].add(host.pk)
    assert {uuids[u].name: hosts for u, hosts in where.items()} == {
        vm.name: {vm.host_id} for vm in placed
    }
    assert workers.process.poll() is None and server.running()
