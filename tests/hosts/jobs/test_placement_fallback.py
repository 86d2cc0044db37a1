"""A start or a migration whose chosen host fails there falls back to the next-ranked host,
on the real task cluster: each try is named on the job (its result's ``attempts`` and its
journal), and a host that failed is not tried again."""

import uuid

import pytest

from hosts import driver
from hosts.host_choice import decision, place
from hosts.models import Host, Job, VirtualMachine
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _ranked(vm, purpose: str = "start") -> list[Host]:
    with decision(vm.cluster_id):
        return place(vm, purpose=purpose).hosts


@pytest.fixture
def squatter():
    """squatter(host, name) -> a domain of that name defined on the host outside Corral (a
    libvirt error for any VM of that name there); removed afterwards."""
    made = []

    def define(host: Host, name: str) -> None:
        spec = driver.DomainSpec(
            uuid=str(uuid.uuid4()), name=name, vcpus=1, memory_mb=64, disk_gb=1
        )
        driver.define(host.uri, spec)
        made.append((host.uri, spec.uuid))

    yield define
    for uri, domain in made:
        driver.undefine(uri, domain)


def _finished(client, job_id: int) -> dict:
    def done():
        shown = client.get(f"/api/jobs/{job_id}/").json()
        return shown if shown["state"] in ("succeeded", "failed", "cancelled") else None

    return wait_until(done, timeout=60, message=lambda: Job.objects.get(pk=job_id).state)


def test_a_start_whose_first_host_fails_runs_on_the_next_and_names_the_failure(
    sim_vm, sim_hosts, squatter, task_cluster, admin_user, client_for
):
    vm = sim_vm()
    first, second = _ranked(vm)[:2]
    squatter(first, vm.domain)
    task_cluster()
    client = client_for(admin_user)

    response = client.post(f"/api/vms/{vm.pk}/start/")
    job = _finished(client, response.json()["id"])

    assert job["state"] == "succeeded", job
    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["host"]) == ("up", second.pk)
    assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(first.uri, str(vm.uuid)) is None
    attempts = job["result"]["attempts"]
    assert [(a["host"], a["outcome"]) for a in attempts] == [
        (first.name, "failed"),
        (second.name, "succeeded"),
    ]
    assert "another domain named" in attempts[0]["reason"]
    journal = [line["message"] for line in job["journal"]]
    assert any(line.startswith(f"Starting on {first.name} failed: ") for line in journal)
    assert f"Starting on {second.name} succeeded (try 2)" in journal


def test_a_start_tries_no_more_hosts_than_configured_nor_one_twice(
    sim_vm, sim_hosts, squatter, task_cluster, admin_user, client_for
):
    vm = sim_vm()
    first, second, third = _ranked(vm)
    for host in (first, second, third):
        squatter(host, vm.domain)
    task_cluster(CORRAL_PLACEMENT_TRIES="2")
    client = client_for(admin_user)

    job = _finished(client, client.post(f"/api/vms/{vm.pk}/start/").json()["id"])

    assert job["state"] == "failed"
    assert [a["host"] for a in job["result"]["attempts"]] == [first.name, second.name]
    assert "failed on 2 host(s)" in job["error"]["message"]
    assert client.get(f"/api/vms/{vm.pk}/").json()["status"] == "down"
    assert VirtualMachine.objects.get(pk=vm.pk).host_id in (None, second.pk)


def test_a_migration_whose_destination_fails_lands_on_the_next_ranked_host(
    running_vm, sim_hosts, squatter, task_cluster, admin_user, client_for
):
    vm = running_vm()
    source = vm.host
    first, second = _ranked(vm, "migrate")[:2]
    squatter(first, vm.domain)
    task_cluster()
    client = client_for(admin_user)

    job = _finished(client, client.post(f"/api/vms/{vm.pk}/migrate/").json()["id"])

    assert job["state"] == "succeeded", job
    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["host"]) == ("up", second.pk)
    assert driver.domain_power_state(second.uri, str(vm.uuid)) == "running"
    assert driver.domain_power_state(source.uri, str(vm.uuid)) is None
    assert [(a["host"], a["outcome"]) for a in job["result"]["attempts"]] == [
        (first.name, "failed"),
        (second.name, "succeeded"),
    ]
    assert first.pk != source.pk and second.pk != source.pk
