"""Many starts placed at once: the cluster's scheduling lock makes each decision see the VMs
the others placed, so no host is promised more memory than it has (PostgreSQL: row locks)."""

import threading
from collections import Counter

import pytest
from django.db import close_old_connections, connection
from django.db.models import Sum

from hosts.host_choice import NoHostAvailable, decision, place
from hosts.models import VirtualMachine, VmStatus

HOSTS, ROOM, VMS = 3, 8, 30


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent placement needs PostgreSQL's row locks; SQLite has one writer")


def _place_for_start(vm: VirtualMachine):
    """The placement part of a start: under the cluster's lock, choose a host and record the VM
    Starting there (what later decisions count as promised)."""
    with decision(vm.cluster_id):
        host = place(vm).host
        VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.STARTING, host=host)
    return host


def _place_all(vm_ids: list[int]) -> dict[int, object]:
    """Run the placement part of a start for every VM, each on its own thread, all at once."""
    outcomes: dict[int, object] = {}
    ready = threading.Barrier(len(vm_ids))

    def place(vm_id: int) -> None:
        close_old_connections()
        try:
            vm = VirtualMachine.objects.select_related("cluster").get(pk=vm_id)
            ready.wait(10)
            outcomes[vm_id] = _place_for_start(vm)
        except NoHostAvailable as exc:
            outcomes[vm_id] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=place, args=(vm_id,)) for vm_id in vm_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def test_thirty_simultaneous_starts_never_overfill_a_host(
    postgres_only, cluster_with, vm_in, make_template
):
    cluster, hosts = cluster_with(hosts=HOSTS)
    for host in hosts:
        host.memory_mb = 1024  # room for 8 VMs of 128 MiB
        host.save(update_fields=["memory_mb"])
    template = make_template(memory_mb=128, vcpus=1)
    vm_ids = [vm_in(cluster, template=template).pk for _ in range(VMS)]

    outcomes = _place_all(vm_ids)

    placed = [o for o in outcomes.values() if not isinstance(o, Exception)]
    refused = [o for o in outcomes.values() if isinstance(o, NoHostAvailable)]
    assert (len(placed), len(refused)) == (HOSTS * ROOM, VMS - HOSTS * ROOM)
    assert Counter(host.name for host in placed) == {"h1": ROOM, "h2": ROOM, "h3": ROOM}
    committed = (
        VirtualMachine.objects.filter(cluster=cluster, status="starting")
        .values("host__name")
        .annotate(memory=Sum("memory_mb"))
    )
    assert {row["host__name"]: row["memory"] for row in committed} == {
        "h1": 1024,
        "h2": 1024,
        "h3": 1024,
    }
    for refusal in refused:
        assert "h1: 0 MiB free, 128 MiB needed (Memory)" in refusal.message
        assert refusal.explanation["filters"][0]["unit"] == "Memory"
    left = VirtualMachine.objects.filter(cluster=cluster, status="down", host__isnull=True)
    assert left.count() == VMS - HOSTS * ROOM
