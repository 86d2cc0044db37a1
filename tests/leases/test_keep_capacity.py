"""Re-planning a lease never moves capacity away from the hosts where its VMs run."""

import pytest

from hosts.models import VirtualMachine
from hosts.sync import mark_unreachable
from leases import services
from leases.models import Allocation
from tests.conftest import unique
from tests.leases.fixtures import at, instances


def _vm_on(reservation, host, make_template):
    template = make_template(memory_mb=1024)
    return VirtualMachine.objects.create(
        name=unique(f"r{reservation.pk}-{host.pk}"),
        cluster=host.cluster,
        template=template,
        host=host,
        reservation=reservation,
        vcpus=1,
        memory_mb=1024,
        disk_gb=1,
    )


def _slots(reservation) -> dict[int, int]:
    return dict(Allocation.objects.filter(reservation=reservation).values_list("host_id", "slots"))


def test_lowering_the_amount_keeps_the_slot_of_a_running_vm(
    reservable_hosts, make_lease, make_template
):
    first, second = reservable_hosts(2)
    lease = make_lease(at(9), at(17), instances(4))
    reservation = lease.reservations.get()
    light = min(_slots(reservation), key=_slots(reservation).get)
    _vm_on(reservation, first if light == first.pk else second, make_template)

    services.update_lease(lease, {"amounts": {reservation.pk: 3}})

    assert _slots(reservation).get(light, 0) >= 1
    assert sum(_slots(reservation).values()) == 3


def test_a_failed_host_moves_only_what_it_held(
    reservable_hosts, make_lease, make_template, django_capture_on_commit_callbacks
):
    hosts = reservable_hosts(3)
    lease = make_lease(at(9), at(17), instances(2, affinity=False))
    reservation = lease.reservations.get()
    held = list(_slots(reservation))
    survivor = next(h for h in hosts if h.pk == held[0])
    _vm_on(reservation, survivor, make_template)

    with django_capture_on_commit_callbacks(execute=True):
        mark_unreachable(held[1], "gone")

    slots = _slots(reservation)
    assert survivor.pk in slots
    assert held[1] not in slots
    assert sum(slots.values()) == 2


def test_raising_an_affine_amount_beyond_the_host_running_its_vms_is_refused(
    reservable_hosts, make_lease, make_template
):
    [first] = reservable_hosts(1)
    lease = make_lease(at(9), at(17), instances(2, affinity=True))
    reservation = lease.reservations.get()
    make_lease(at(9), at(17), instances(1))  # the last free slot of the first host
    [second] = reservable_hosts(1, cluster=first.cluster)  # empty: it could take all three
    for _ in range(2):
        _vm_on(reservation, first, make_template)

    with pytest.raises(services.LeaseRefused) as refused:
        services.update_lease(lease, {"amounts": {reservation.pk: 3}})

    assert "only 2 of 3 instances fit on the host running its VMs" in str(refused.value)
    assert "(3 instances of 1024 MiB need 3072 MiB free on that host; it has 2048)" in str(
        refused.value
    )
    reservation.refresh_from_db()
    assert reservation.amount == 2
    assert _slots(reservation) == {first.pk: 2}
    third = make_lease(at(9), at(17), instances(3))
    assert _slots(third.reservations.get()) == {second.pk: 3}
    with pytest.raises(services.LeaseRefused):  # the first host is full: 2 running, 1 held
        make_lease(at(9), at(17), instances(1))


def test_raising_an_affine_amount_grows_it_on_the_host_running_its_vms(
    reservable_hosts, make_lease, make_template
):
    hosts = reservable_hosts(2)
    lease = make_lease(at(9), at(17), instances(1, affinity=True))
    reservation = lease.reservations.get()
    [held] = _slots(reservation)
    host = next(h for h in hosts if h.pk == held)
    _vm_on(reservation, host, make_template)

    services.update_lease(lease, {"amounts": {reservation.pk: 3}})

    assert _slots(reservation) == {host.pk: 3}
