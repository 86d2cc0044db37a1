"""A reserved host that goes into maintenance, leaves the free pool or is deleted: its leases'
capacity is planned again on free reservable capacity for the rest of their window, or the
lease is degraded with an alert naming the reservation, how much it misses and from when; the
lease is whole again, with an event, when capacity returns (the host comes back, another host
joins the pool, a lease ends)."""

import pytest
import time_machine

from hosts import driver, services, sync
from hosts.models import Host, VirtualMachine
from leases import lifecycle, repair
from leases import services as leases
from leases.launch import reserved_hosts
from leases.models import Allocation, Lease
from project.models import Event, EventKind
from tests.conftest import unique
from tests.leases.fixtures import PER_HOST, allocations_of, at, instances, whole_hosts
from tests.project.admin.fixtures import admin_url, form_errors, logged_in, page_form

pytestmark = pytest.mark.django_db

REPORT = driver.HostReport(cpus=16, memory_mb=3072, cpu_model="test")


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """committed(fn, *args) -> fn(*args), with what it leaves for after the commit run too."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run


def fresh(lease: Lease) -> Lease:
    return Lease.objects.get(pk=lease.pk)


def said(lease: Lease, kind: str) -> list[str]:
    return list(
        Event.objects.filter(lease_id=lease.pk, kind=kind)
        .order_by("pk")
        .values_list("message", flat=True)
    )


# -- maintenance -----------------------------------------------------------------------------


def test_maintenance_moves_the_capacity_before_the_vms_migrate(
    reservable_hosts, make_lease, make_vm
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(-48), at(12), instances(2, affinity=True))
    lifecycle.start_lease(lease)
    reservation = lease.reservations.get()
    vm = make_vm(cluster=first.cluster, host=first, reservation=reservation, status="up")

    jobs = services.put_in_maintenance(first)

    assert allocations_of(lease) == {second.name: 2}
    assert [job.vm_id for job in jobs] == [vm.pk]
    # The migration the job asks the scheduler for may land where the capacity now is.
    assert reserved_hosts(VirtualMachine.objects.get(pk=vm.pk)) == {second.pk}
    assert not fresh(lease).degraded


def test_maintenance_with_no_room_left_keeps_the_capacity_there_and_degrades(
    reservable_hosts, make_lease
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(2), name="kept")

    services.put_in_maintenance(host)

    reservation = lease.reservations.get()
    assert fresh(lease).degraded
    assert (reservation.missing, reservation.missing_since) == (2, at(9))
    assert allocations_of(lease) == {host.name: 2}
    assert said(lease, EventKind.ALERT) == [
        f"Lease kept is degraded: reservation {reservation.pk} is 2 of 2 instances short from "
        f"{at(9):%Y-%m-%d} 09:00 (host {host.name} is in maintenance); no free reservable "
        "capacity can take them."
    ]


def test_a_host_back_from_maintenance_makes_its_leases_whole(
    reservable_hosts, make_lease, committed
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(2), name="back")
    services.put_in_maintenance(host)
    services.activate_host(host)

    committed(sync.apply_report, host.pk, REPORT)

    reservation = lease.reservations.get()
    assert not fresh(lease).degraded
    assert (reservation.missing, reservation.missing_since) == (0, None)
    assert allocations_of(lease) == {host.name: 2}
    assert said(lease, EventKind.CHANGED)[-2:] == [
        f"Lease back: reservation {reservation.pk} holds its 2 instances again.",
        "Lease back is no longer degraded: it holds all its capacity again.",
    ]


# -- a host that stops answering, and answers again ------------------------------------------


def test_a_host_answering_again_makes_its_degraded_leases_whole(
    reservable_hosts, make_lease, committed
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), whole_hosts(1))
    committed(sync.mark_unreachable, host.pk, "connection refused")
    assert fresh(lease).degraded

    committed(sync.apply_report, host.pk, REPORT)

    assert not fresh(lease).degraded
    assert allocations_of(lease) == {host.name: 0}


def test_what_fits_moves_and_the_rest_waits_on_the_failed_host(
    reservable_hosts, make_lease, committed
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(5), name="split")
    assert allocations_of(lease) == {first.name: 3, second.name: 2}
    [third] = reservable_hosts(1, cluster=first.cluster)
    make_lease(at(9), at(12), instances(2, affinity=True))  # leaves the third host one slot

    committed(sync.mark_unreachable, first.pk, "connection refused")

    reservation = lease.reservations.get()
    # One more on each host with a slot; the last one waits on the failed host.
    assert allocations_of(lease) == {first.name: 1, second.name: 3, third.name: 1}
    assert reservation.missing == 1
    assert said(lease, EventKind.CHANGED)[-1] == (
        f"Lease split: capacity moved as host {first.name} is not responding: reservation "
        f"{reservation.pk} now also holds 2 instances on {second.name}, {third.name}."
    )
    assert said(lease, EventKind.ALERT) == [
        f"Lease split is degraded: reservation {reservation.pk} is 1 of 5 instances short from "
        f"{at(9):%Y-%m-%d} 09:00 (host {first.name} is not responding); no free reservable "
        "capacity can take it."
    ]


def test_a_host_in_error_gives_its_capacity_up_too(reservable_hosts, make_lease, committed):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), whole_hosts(1))

    committed(sync.mark_refused, first.pk, "the URI is one Corral never opens")

    assert allocations_of(lease) == {second.name: 0}
    assert said(lease, EventKind.CHANGED)[-1] == (
        f"Lease {lease.name}: capacity moved as host {first.name} is in error: reservation "
        f"{lease.reservations.get().pk} now also holds 1 host on {second.name}."
    )


# -- leaving the free pool -------------------------------------------------------------------


def test_unmarking_a_host_through_the_api_moves_its_leases(
    reservable_hosts, make_lease, client_for, admin_user
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))

    response = client_for(admin_user).patch(
        f"/api/hosts/{first.pk}/", {"reservable": False}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["reservable"] is False
    assert allocations_of(lease) == {second.name: 2}


def test_unmarking_a_host_running_lease_vms_through_the_api_is_a_400(
    reservable_hosts, make_lease, make_vm, client_for, admin_user
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(-48), at(12), instances(2, affinity=True))
    lifecycle.start_lease(lease)
    vm = make_vm(
        cluster=first.cluster, host=first, reservation=lease.reservations.get(), status="up"
    )

    response = client_for(admin_user).patch(
        f"/api/hosts/{first.pk}/", {"reservable": False}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "reservable": [
            f"Host {first.name} runs VMs of leases ({vm.name}); it stays reservable until they "
            "stop or move."
        ]
    }
    assert Host.objects.get(pk=first.pk).reservable
    assert allocations_of(lease) == {first.name: 2}


def test_the_last_host_leaving_the_pool_leaves_the_capacity_owed(reservable_hosts, make_lease):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), whole_hosts(1), name="owed")

    Host.objects.get(pk=host.pk).delete()

    reservation = lease.reservations.get()
    assert list(reservation.allocations.values_list("host", "whole_host")) == [(None, True)]
    assert (reservation.missing, fresh(lease).degraded) == (1, True)
    assert said(lease, EventKind.ALERT) == [
        f"Lease owed is degraded: reservation {reservation.pk} is 1 of 1 host short from "
        f"{at(9):%Y-%m-%d} 09:00 (host {host.name} was deleted); no free reservable capacity "
        "can take it."
    ]


def test_deleting_a_reserved_host_through_the_api_moves_its_leases_first(
    reservable_hosts, make_lease, client_for, admin_user
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), whole_hosts(1))

    response = client_for(admin_user).delete(f"/api/hosts/{first.pk}/")

    assert response.status_code == 204
    assert allocations_of(lease) == {second.name: 0}
    assert not fresh(lease).degraded


# -- capacity returning ----------------------------------------------------------------------


def test_a_host_joining_the_pool_makes_a_degraded_lease_whole(
    reservable_hosts, make_lease, make_host, committed
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(2), name="rescued")
    Host.objects.get(pk=host.pk).delete()
    spare = make_host(cluster=host.cluster, status="up", cpus=16, memory_mb=3072)

    committed(make_reservable, spare)

    reservation = lease.reservations.get()
    assert allocations_of(lease) == {spare.name: 2}
    assert list(reservation.allocations.values_list("host", flat=True)) == [spare.pk]
    assert not fresh(lease).degraded
    assert said(lease, EventKind.CHANGED)[-3:] == [
        "Lease rescued: capacity moved as a host left the free pool: reservation "
        f"{reservation.pk} now also holds 2 instances on {spare.name}.",
        f"Lease rescued: reservation {reservation.pk} holds its 2 instances again.",
        "Lease rescued is no longer degraded: it holds all its capacity again.",
    ]


def make_reservable(host):
    from leases import free_pool

    return free_pool.make_reservable(host, {})


def test_a_lease_ending_makes_a_degraded_lease_whole(reservable_hosts, make_lease, committed):
    first, second = reservable_hosts(2)
    waiting = make_lease(at(9), at(12), instances(PER_HOST, affinity=True))
    blocker = make_lease(at(10), at(11), instances(1, affinity=True))
    assert allocations_of(blocker) == {second.name: 1}
    committed(sync.mark_unreachable, first.pk, "connection refused")
    assert fresh(waiting).degraded

    committed(leases.delete_lease, blocker)

    assert allocations_of(waiting) == {second.name: PER_HOST}
    assert not fresh(waiting).degraded


def test_a_lease_reaching_its_end_makes_a_degraded_lease_whole(
    reservable_hosts, make_lease, committed
):
    first, second = reservable_hosts(2)
    waiting = make_lease(at(9), at(12), instances(PER_HOST, affinity=True), name="waiting")
    blocker = make_lease(at(-48), at(10), instances(1, affinity=True))
    assert allocations_of(blocker) == {second.name: 1}
    committed(sync.mark_unreachable, first.pk, "connection refused")
    assert allocations_of(waiting) == {first.name: PER_HOST}

    with time_machine.travel(at(10), tick=False):
        committed(lifecycle.run_due_events)

    assert Lease.objects.get(pk=blocker.pk).status == "TERMINATED"
    assert allocations_of(waiting) == {second.name: PER_HOST}
    assert said(waiting, EventKind.CHANGED)[-1] == (
        "Lease waiting is no longer degraded: it holds all its capacity again."
    )


def test_a_host_marked_reservable_again_makes_its_leases_whole(
    reservable_hosts, make_lease, client_for, admin_user, committed
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    admin = client_for(admin_user)
    committed(admin.patch, f"/api/hosts/{host.pk}/", {"reservable": False}, format="json")
    assert fresh(lease).degraded

    response = committed(admin.patch, f"/api/hosts/{host.pk}/", {"reservable": True}, format="json")

    assert response.status_code == 200
    assert allocations_of(lease) == {host.name: 2}
    assert not fresh(lease).degraded


def test_a_change_of_a_degraded_lease_must_fit_whole_and_makes_it_whole(
    reservable_hosts, make_lease, committed
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(PER_HOST, affinity=True))
    make_lease(at(10), at(11), instances(1, affinity=True))
    committed(sync.mark_unreachable, first.pk, "connection refused")
    reservation = lease.reservations.get()

    leases.update_lease(lease, {"name": "renamed"})  # plans nothing: still degraded
    assert fresh(lease).degraded
    with pytest.raises(leases.LeaseRefused):
        leases.update_lease(lease, {"end": at(13)})
    leases.update_lease(lease, {"amounts": {reservation.pk: 2}})

    assert allocations_of(lease) == {second.name: 2}
    assert (fresh(lease).degraded, lease.reservations.get().missing) == (False, 0)


def test_the_repair_loop_catches_a_host_taken_out_of_the_pool_behind_its_back(
    reservable_hosts, make_lease
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    Host.objects.filter(pk=first.pk).update(reservable=False)  # no signal, no save

    outcomes = repair.make_whole()

    assert [(o.lease.pk, o.moved, o.missing) for o in outcomes] == [(lease.pk, 2, 0)]
    assert allocations_of(lease) == {second.name: 2}
    assert repair.make_whole() == []  # nothing left to do: a quiet second pass


# -- what a degraded lease shows and allows ---------------------------------------------------


def test_the_api_shows_what_each_reservation_misses_and_from_when(
    reservable_hosts, make_lease, committed, client_for
):
    [host] = reservable_hosts(1)
    lease = make_lease(at(9), at(12), instances(2))
    committed(sync.mark_unreachable, host.pk, "connection refused")

    shown = client_for(lease.owner).get(f"/api/leases/{lease.pk}/").json()

    assert shown["degraded"] is True
    [reservation] = shown["reservations"]
    assert reservation["missing"] == 2
    assert reservation["missing_since"].startswith(f"{at(9):%Y-%m-%dT%H:%M}")
    assert reservation["allocations"] == [
        {"host": host.pk, "host_name": host.name, "slots": 2, "whole_host": False}
    ]


def test_a_degraded_reservation_launches_only_what_it_holds(
    reservable_hosts, make_lease, make_template, client_for
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(-48), at(12), instances(4))
    lifecycle.start_lease(lease)
    Host.objects.get(pk=second.pk).delete()  # one of four instances was there
    reservation = lease.reservations.get()
    template = make_template(cluster=None, vcpus=1, memory_mb=1024)
    client = client_for(lease.owner)

    answers = [
        client.post(
            "/api/vms/",
            {"name": unique("leased"), "template": template.pk, "reservation": reservation.pk},
            format="json",
        )
        for i in range(4)
    ]

    assert [a.status_code for a in answers] == [201, 201, 201, 400]
    assert answers[-1].json() == {
        "reservation": [
            f"Lease {lease.name} is degraded: the reservation holds 3 of its 4 instances, and 3 "
            "are launched."
        ]
    }
    assert Allocation.objects.filter(reservation=reservation, host=None).get().slots == 1


# -- the admin console -----------------------------------------------------------------------


def test_unmarking_a_host_in_the_admin_console_moves_its_leases(
    reservable_hosts, make_lease, admin_user
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(12), instances(2, affinity=True))
    console, page = logged_in(admin_user), admin_url("hosts.Host", "change", first.pk)
    form = page_form(console, page)
    del form["reservable"]  # the box unticked

    response = console.post(page, form)

    assert response.status_code == 302
    assert not Host.objects.get(pk=first.pk).reservable
    assert allocations_of(lease) == {second.name: 2}


def test_the_admin_console_keeps_a_host_running_lease_vms_reservable(
    reservable_hosts, make_lease, make_vm, admin_user
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(-48), at(12), instances(2, affinity=True))
    lifecycle.start_lease(lease)
    vm = make_vm(
        cluster=first.cluster, host=first, reservation=lease.reservations.get(), status="up"
    )
    console, page = logged_in(admin_user), admin_url("hosts.Host", "change", first.pk)
    form = page_form(console, page)
    del form["reservable"]

    response = console.post(page, form)

    assert f"Host {first.name} runs VMs of leases ({vm.name})" in form_errors(response)
    assert Host.objects.get(pk=first.pk).reservable
    assert allocations_of(lease) == {first.name: 2}
