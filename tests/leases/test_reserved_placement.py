"""Reserved placement on real hosts (the simulated libvirt daemons), with start jobs run in
this process: a reservation's VMs run only on the hosts allocated to it, and reservable hosts
run nothing else."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import jobs
from hosts.models import Host, Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from leases import lifecycle
from leases.models import Lease
from scheduling import services as policies
from scheduling.models import Policy, PolicyFilter, PolicyUnit
from tests.leases.fixtures import instances

pytestmark = pytest.mark.django_db
SIZE = {"vcpus": 1, "memory_mb": 128}


@pytest.fixture
def spreading(sim_hosts):
    """The simulated cluster under vm_evenly_distributed: left alone, VMs spread out."""
    cluster = sim_hosts[0].cluster
    cluster.policy = Policy.objects.get(name="vm_evenly_distributed")
    cluster.save(update_fields=["policy"])


@pytest.fixture
def packing(sim_hosts):
    """The simulated cluster under power_saving: left alone, VMs pile onto one host."""
    cluster = sim_hosts[0].cluster
    cluster.policy = Policy.objects.get(name="power_saving")
    cluster.save(update_fields=["policy"])


@pytest.fixture
def reservable(sim_hosts):
    """reservable(*names) -> those simulated hosts made reservable (the others stay ordinary)."""

    def make(*names: str) -> list[Host]:
        Host.objects.filter(cluster=sim_hosts[0].cluster, name__in=names).update(reservable=True)
        return list(Host.objects.filter(cluster=sim_hosts[0].cluster, name__in=names))

    return make


@pytest.fixture
def active_lease(make_lease):
    """active_lease(request) -> a lease from now to an hour on, started."""

    def make(request: dict) -> Lease:
        now = timezone.now()
        lease = make_lease(now, now + timedelta(hours=1), request)
        lifecycle.start_lease(lease)
        lease.refresh_from_db()
        return lease

    return make


def start(vm: VirtualMachine) -> VirtualMachine:
    job = jobs.submit(JobKind.START, vm=vm)
    outcome = jobs.run(job.pk, OPERATION_BY_KIND)
    assert outcome == "succeeded", Job.objects.get(pk=job.pk).error_message
    vm.refresh_from_db()
    return vm


def launch(lease: Lease, make_vm, template, count: int) -> list[VirtualMachine]:
    reservation = lease.reservations.get()
    cluster = reservation.allocations.first().host.cluster
    return [
        make_vm(cluster=cluster, template=template, reservation=reservation) for _ in range(count)
    ]


def allocated(lease: Lease) -> set[str]:
    return set(lease.reservations.get().allocations.values_list("host__name", flat=True).distinct())


def test_vms_of_a_reservation_run_only_on_its_allocated_host(
    spreading, reservable, active_lease, make_vm, small_template
):
    reservable("sim-1", "sim-2", "sim-3")
    lease = active_lease(instances(3, affinity=True, **SIZE))
    [host] = allocated(lease)

    vms = [start(vm) for vm in launch(lease, make_vm, small_template, 3)]

    assert {vm.host.name for vm in vms} == {host}


def test_vms_of_a_reservation_without_affinity_run_on_distinct_hosts(
    packing, reservable, active_lease, make_vm, small_template
):
    reservable("sim-1", "sim-2", "sim-3")
    lease = active_lease(instances(3, affinity=False, **SIZE))
    assert allocated(lease) == {"sim-1", "sim-2", "sim-3"}

    vms = [start(vm) for vm in launch(lease, make_vm, small_template, 3)]

    assert sorted(vm.host.name for vm in vms) == ["sim-1", "sim-2", "sim-3"]


def test_ordinary_vms_never_run_on_reservable_hosts(spreading, reservable, sim_vm):
    reservable("sim-2", "sim-3")

    vms = [start(sim_vm()) for _ in range(4)]

    assert {vm.host.name for vm in vms} == {"sim-1"}


def test_an_ordinary_vm_finds_no_host_when_every_host_is_reservable(reservable, sim_vm):
    reservable("sim-1", "sim-2", "sim-3")
    vm = sim_vm()

    outcome = jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND)

    assert outcome == "failed"
    job = Job.objects.get(vm=vm)
    assert job.error_code == "no_host"
    vm.refresh_from_db()
    assert (vm.status, vm.host) == ("down", None)


@pytest.mark.parametrize("change", ["filter dropped", "unit disabled"])
def test_ordinary_vms_stay_off_reservable_hosts_whatever_the_policy_says(
    sim_hosts, reservable, sim_vm, change
):
    custom = policies.clone(Policy.objects.get(name="vm_evenly_distributed"), "no-leases")
    if change == "filter dropped":
        PolicyFilter.objects.filter(policy=custom, unit__name="Reservation").delete()
    else:
        PolicyUnit.objects.filter(name="Reservation").update(enabled=False)
    cluster = sim_hosts[0].cluster
    cluster.policy = custom
    cluster.save(update_fields=["policy"])
    reservable("sim-2", "sim-3")

    vms = [start(sim_vm()) for _ in range(4)]

    assert {vm.host.name for vm in vms} == {"sim-1"}
