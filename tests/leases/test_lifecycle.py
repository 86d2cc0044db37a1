"""A lease's life: the ticker starts it, warns before its end and ends it on time (catching up
on what it missed), and VMs launch into it only inside its window and within its amount."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import jobs
from hosts.models import Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from leases import lifecycle, services
from leases.models import EventStatus, EventType, Lease, LeaseEvent, LeaseStatus
from project.models import Event, EventKind
from tests.conftest import unique, wait_until
from tests.leases.fixtures import PER_HOST, at, instances

pytestmark = pytest.mark.usefixtures("warn_half_an_hour_before")


def lease_messages() -> list[str]:
    """What the event feed said about leases, in order."""
    return list(Event.objects.filter(object_type="lease").values_list("message", flat=True))


def status_of(lease: Lease) -> tuple[str, set[str]]:
    lease.refresh_from_db()
    return lease.status, set(lease.reservations.values_list("status", flat=True))


@pytest.fixture
def one_host(reservable_hosts):
    return reservable_hosts(1)[0]


@pytest.fixture
def warn_half_an_hour_before(settings):
    settings.LEASE_BEFORE_END_MINUTES = 30


@pytest.fixture
def with_vms(make_vm, make_template):
    """with_vms(lease, *statuses) -> VMs launched into the lease's first reservation, one per
    status, on its first allocated host."""

    def make(lease: Lease, *statuses: str) -> list[VirtualMachine]:
        reservation = lease.reservations.first()
        host = reservation.allocations.first().host
        template = make_template(vcpus=1, memory_mb=1024)
        return [
            make_vm(
                cluster=host.cluster,
                template=template,
                reservation=reservation,
                status=status,
                host=host if status != "down" else None,
            )
            for status in statuses
        ]

    return make


# -- the ticker's events ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_lease_whose_start_has_come_becomes_active(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(2))

    ran = lifecycle.run_due_events(now=at(9))

    assert ran == 1
    assert status_of(lease) == (LeaseStatus.ACTIVE, {"active"})
    assert lease_messages()[-1] == f"Lease {lease.name} started"


@pytest.mark.django_db
def test_a_lease_reserving_nothing_starts_and_ends_like_any_other(make_lease):
    lease = make_lease(at(9), at(12))

    started = lifecycle.run_due_events(now=at(9))
    after_start = Lease.objects.get(pk=lease.pk).status
    ended = lifecycle.run_due_events(now=at(12))

    assert (started, after_start) == (1, LeaseStatus.ACTIVE)
    assert ended == 2  # the warning before the end, then the end
    assert Lease.objects.get(pk=lease.pk).status == LeaseStatus.TERMINATED


@pytest.mark.django_db
def test_a_lease_whose_start_has_not_come_stays_pending(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(2))

    ran = lifecycle.run_due_events(now=at(9) - timedelta(seconds=1))

    assert ran == 0
    assert status_of(lease) == (LeaseStatus.PENDING, {"pending"})


@pytest.mark.django_db
def test_the_owner_is_warned_before_the_end(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.run_due_events(now=at(9))

    lifecycle.run_due_events(now=at(11.5))

    alert = Event.objects.filter(kind=EventKind.ALERT, object_type="lease").get()
    assert alert.message == (
        f"Lease {lease.name} ends at {at(12):%Y-%m-%d} 12:00; its VMs will be stopped then."
    )
    assert (alert.lease_id, alert.user_id) == (lease.pk, lease.owner_id)
    assert status_of(lease)[0] == LeaseStatus.ACTIVE


@pytest.mark.django_db
def test_an_extended_lease_is_warned_again_before_its_new_end(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.run_due_events(now=at(11.5))
    services.update_lease(lease, {"end": at(14)})

    lifecycle.run_due_events(now=at(13.5))

    alerts = Event.objects.filter(kind=EventKind.ALERT, lease_id=lease.pk)
    assert list(alerts.values_list("message", flat=True)) == [
        f"Lease {lease.name} ends at {at(12):%Y-%m-%d} 12:00; its VMs will be stopped then.",
        f"Lease {lease.name} ends at {at(14):%Y-%m-%d} 14:00; its VMs will be stopped then.",
    ]


@pytest.mark.django_db
def test_at_its_end_a_lease_terminates_and_its_running_vms_are_powered_off(
    one_host, make_lease, with_vms
):
    lease = make_lease(at(9), at(12), instances(3))
    lifecycle.run_due_events(now=at(11.9))
    up, paused, down = with_vms(lease, "up", "paused", "down")

    lifecycle.run_due_events(now=at(12))

    assert status_of(lease) == (LeaseStatus.TERMINATED, {"deleted"})
    poweroffs = Job.objects.filter(kind=JobKind.POWEROFF)
    assert sorted(poweroffs.values_list("vm_id", flat=True)) == sorted([up.pk, paused.pk])
    assert not Job.objects.filter(kind=JobKind.DELETE).exists()
    assert lease_messages()[-1] == f"Lease {lease.name} ended"


@pytest.mark.django_db
def test_a_lease_ending_with_delete_deletes_its_vms_after_powering_them_off(
    one_host, make_lease, with_vms
):
    lease = make_lease(at(9), at(12), instances(2), end_action="delete")
    lifecycle.run_due_events(now=at(11.9))
    up, down = with_vms(lease, "up", "down")

    lifecycle.run_due_events(now=at(12))

    jobs_of = {
        vm.pk: list(Job.objects.filter(vm=vm).order_by("pk").values_list("kind", flat=True))
        for vm in (up, down)
    }
    assert jobs_of == {up.pk: [JobKind.POWEROFF, JobKind.DELETE], down.pk: [JobKind.DELETE]}


@pytest.mark.django_db
def test_events_missed_while_down_are_caught_up_in_order(reservable_hosts, make_lease):
    reservable_hosts(2)
    first = make_lease(at(9), at(11), instances(2), name="first")
    second = make_lease(at(10), at(12), instances(2), name="second")

    ran = lifecycle.run_due_events(now=at(13))

    assert ran == 6
    assert lease_messages()[-6:] == [
        "Lease first started",
        "Lease second started",
        f"Lease first ends at {at(11):%Y-%m-%d} 11:00; its VMs will be stopped then.",
        "Lease first ended",
        f"Lease second ends at {at(12):%Y-%m-%d} 12:00; its VMs will be stopped then.",
        "Lease second ended",
    ]
    assert status_of(first)[0] == status_of(second)[0] == LeaseStatus.TERMINATED
    assert set(LeaseEvent.objects.values_list("status", flat=True)) == {EventStatus.DONE}


@pytest.mark.django_db
def test_an_ending_lease_finishes_before_the_next_starts_on_its_capacity(one_host, make_lease):
    # The later lease is made first, so its start event comes first by id.
    later = make_lease(at(10), at(11), instances(PER_HOST), name="later")
    earlier = make_lease(at(9), at(10), instances(PER_HOST), name="earlier")
    lifecycle.run_due_events(now=at(9.75))
    assert status_of(earlier)[0] == LeaseStatus.ACTIVE

    lifecycle.run_due_events(now=at(10))

    assert lease_messages()[-2:] == ["Lease earlier ended", "Lease later started"]
    assert status_of(later)[0] == LeaseStatus.ACTIVE
    assert status_of(earlier)[0] == LeaseStatus.TERMINATED


@pytest.mark.django_db
def test_an_event_is_carried_out_once(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(1))
    lifecycle.run_due_events(now=at(9))

    again = lifecycle.run_due_events(now=at(9))

    assert again == 0
    assert lease_messages().count(f"Lease {lease.name} started") == 1


@pytest.mark.django_db
def test_a_start_event_of_a_deleted_lease_is_gone_with_it(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(1))
    services.delete_lease(lease)

    assert lifecycle.run_due_events(now=at(13)) == 0


@pytest.mark.django_db
def test_moving_a_pending_lease_moves_its_start_event(one_host, make_lease):
    lease = make_lease(at(9), at(12), instances(1))
    services.update_lease(lease, {"start": at(10), "end": at(12)})

    assert lifecycle.run_due_events(now=at(9.5)) == 0
    assert LeaseEvent.objects.get(lease=lease, event_type=EventType.START).time == at(10)


# -- launching VMs into a reservation ---------------------------------------------------------


@pytest.fixture
def launcher(client_for, make_template):
    """launcher(lease) -> (POST /api/vms/ into the lease's reservation as its owner)."""
    template = make_template(cluster=None, vcpus=1, memory_mb=1024)

    def launch(lease: Lease, **fields):
        reservation = lease.reservations.get()
        body = {"name": unique("leased"), "template": template.pk, "reservation": reservation.pk}
        return client_for(lease.owner).post("/api/vms/", body | fields, format="json")

    return launch


@pytest.mark.django_db
def test_a_vm_launches_into_an_active_reservation_in_its_hosts_cluster(
    one_host, make_lease, launcher
):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.start_lease(lease)

    response = launcher(lease)

    assert response.status_code == 201, response.json()
    vm = VirtualMachine.objects.get(pk=response.json()["id"])
    assert (vm.reservation.lease_id, vm.cluster_id, vm.owner_id) == (
        lease.pk,
        one_host.cluster_id,
        lease.owner_id,
    )


@pytest.mark.django_db
def test_a_vm_cannot_launch_into_a_lease_that_has_not_started(one_host, make_lease, launcher):
    lease = make_lease(at(9), at(12), instances(2))

    response = launcher(lease)

    assert response.status_code == 400
    assert response.json() == {
        "reservation": [
            f"Lease {lease.name} is not active; launch from {at(9):%Y-%m-%d} 09:00 "
            f"to {at(12):%Y-%m-%d} 12:00."
        ]
    }
    assert not VirtualMachine.objects.exists()


@pytest.mark.django_db
def test_a_vm_cannot_launch_into_a_lease_that_has_ended(one_host, make_lease, launcher):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.run_due_events(now=at(12))

    response = launcher(lease)

    assert response.status_code == 400
    assert "is not active" in response.json()["reservation"][0]


@pytest.mark.django_db
def test_no_more_vms_launch_than_the_reservations_amount(one_host, make_lease, launcher):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.start_lease(lease)
    assert launcher(lease).status_code == 201
    assert launcher(lease).status_code == 201

    response = launcher(lease)

    assert response.status_code == 400
    assert response.json() == {"reservation": ["The reservation's 2 instances are all launched."]}
    assert VirtualMachine.objects.count() == 2


@pytest.mark.django_db
def test_a_vm_larger_than_the_reserved_size_is_refused(one_host, make_lease, launcher):
    lease = make_lease(at(9), at(12), instances(2))
    lifecycle.start_lease(lease)

    response = launcher(lease, memory_mb=2048)

    assert response.status_code == 400
    assert response.json() == {"memory_mb": ["The reservation holds 1024 MiB per instance."]}


@pytest.mark.django_db
def test_a_reservation_of_one_instance_says_its_only_instance_is_launched(
    one_host, make_lease, launcher
):
    lease = make_lease(at(9), at(12), instances(1))
    lifecycle.start_lease(lease)
    assert launcher(lease).status_code == 201

    response = launcher(lease)

    assert response.status_code == 400
    assert response.json() == {"reservation": ["The reservation's only instance is launched."]}


@pytest.mark.django_db
def test_a_vm_with_a_larger_disk_than_the_reserved_one_is_refused(one_host, make_lease, launcher):
    lease = make_lease(at(9), at(12), instances(2))  # 10 GB of disk each
    lifecycle.start_lease(lease)

    response = launcher(lease, vcpus=2, disk_gb=20)

    assert response.status_code == 400
    assert response.json() == {
        "vcpus": ["The reservation holds 1 vCPU per instance."],
        "disk_gb": ["The reservation holds 10 GB of disk per instance."],
    }
    assert not VirtualMachine.objects.exists()


@pytest.mark.django_db
def test_a_vm_of_an_ended_lease_does_not_start(one_host, make_lease, with_vms):
    lease = make_lease(at(9), at(12), instances(1))
    lifecycle.run_due_events(now=at(12))
    [vm] = with_vms(lease, "down")

    outcome = jobs.run(jobs.submit(JobKind.START, vm=vm).pk, OPERATION_BY_KIND)

    assert outcome == "failed"
    assert Job.objects.get(vm=vm).error_code == "lease_not_active"


# -- with a real task cluster ----------------------------------------------------------------


@pytest.mark.slow
def test_the_ticker_starts_a_lease_that_starts_now(task_cluster, one_host, make_lease):
    lease = make_lease(timezone.now(), timezone.now() + timedelta(hours=1), instances(1))

    task_cluster(CORRAL_TICKER_RUN_SECONDS=2)

    wait_until(
        lambda: status_of(lease)[0] == LeaseStatus.ACTIVE,
        timeout=30,
        message="the ticker did not start the lease",
    )
    assert status_of(lease)[1] == {"active"}
