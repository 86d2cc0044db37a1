"""Giving a VM back to its pool: a stateless pool reverts it to its base snapshot, an automatic
pool takes it back when its user shuts it down, a manual one only when it is returned."""

import contextlib

import libvirt
import pytest

from hosts import driver, sync
from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools.models import PoolType
from tests.pools.fixtures import pool_vms, run_queued_tasks

MARKER_NS = "https://corral.invalid/xmlns/test-marker"


@contextlib.contextmanager
def outside(vm: VirtualMachine):
    """The VM's domain through a second libvirt connection to its host (behind Corral)."""
    conn = libvirt.open(vm.host.uri)
    try:
        yield conn.lookupByUUIDString(str(vm.uuid))
    finally:
        conn.close()


def write_marker(vm: VirtualMachine) -> None:
    """Leave a trace in the domain's definition, as a user's change to the VM would."""
    flags = libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG
    with outside(vm) as domain:
        domain.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT, "<marker>dirty</marker>", "t", MARKER_NS, flags
        )


def read_marker(vm: VirtualMachine) -> str | None:
    """The marker in the domain's persistent definition, or None when it has none."""
    with outside(vm) as domain:
        try:
            return domain.metadata(
                libvirt.VIR_DOMAIN_METADATA_ELEMENT, MARKER_NS, libvirt.VIR_DOMAIN_AFFECT_CONFIG
            )
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_METADATA:
                return None
            raise


@pytest.fixture
def ready_pool(real_pool):
    """ready_pool(size=1, prestarted_vms=1, **fields) -> a pool on the simulated hosts whose
    VMs are prepared and whose prestarted VMs are up."""

    def make(size: int = 1, prestarted_vms: int = 1, **fields):
        pool = real_pool(size=size, prestarted_vms=prestarted_vms, **fields)
        run_queued_tasks()
        return pool

    return make


@pytest.fixture
def taken(pool_user, client_for):
    """taken(pool) -> (vm, user, client): a pool user who has just taken a VM of the pool."""

    def take(pool):
        user = pool_user(pool)
        client = client_for(user)
        response = client.post(f"/api/vmpools/{pool.pk}/allocatevm/")
        assert response.status_code == 200, response.json()
        vm = VirtualMachine.objects.select_related("host").get(pk=response.json()["vm"]["id"])
        return vm, user, client

    return take


@pytest.fixture
def admin(admin_user, client_for):
    return client_for(admin_user)


def _return(client, vm):
    return client.post(f"/api/vms/{vm.pk}/return/")


def _vm_grants(client) -> list[tuple[str, int]]:
    return [
        (grant["role"], grant["object_id"])
        for grant in client.get("/api/me/").json()["grants"]
        if grant["object_type"] == "vm"
    ]


# -- stateless return ----------------------------------------------------------------------------


def test_a_stateless_return_reverts_the_domain_to_its_base_snapshot(ready_pool, taken, admin):
    pool = ready_pool(type=PoolType.MANUAL, stateless=True)
    vm, user, client = taken(pool)
    write_marker(vm)
    assert read_marker(vm) == "<marker>dirty</marker>"

    response = _return(admin, vm)
    assert response.status_code == 202, response.json()
    assert [job["kind"] for job in response.json()] == ["poweroff", "revert"]
    run_queued_tasks()

    assert read_marker(vm) is None
    revert = Job.objects.get(vm=vm, kind=JobKind.REVERT)
    assert (revert.state, revert.result["snapshot"]) == (JobState.SUCCEEDED, "corral-base")


def test_a_return_to_a_stateful_pool_keeps_what_the_user_changed(ready_pool, taken, admin):
    pool = ready_pool(type=PoolType.MANUAL, stateless=False)
    vm, user, client = taken(pool)
    write_marker(vm)

    response = _return(admin, vm)
    run_queued_tasks()

    assert response.json() == []
    assert read_marker(vm) == "<marker>dirty</marker>"
    assert not Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()


def test_a_reverted_vm_is_prestarted_again(ready_pool, taken, admin):
    pool = ready_pool(type=PoolType.MANUAL, stateless=True)
    vm, user, client = taken(pool)

    _return(admin, vm)
    run_queued_tasks()

    vm.refresh_from_db()
    assert (vm.status, vm.owner) == (VmStatus.UP, None)
    assert driver.domain_power_state(vm.host.uri, str(vm.uuid)) == "running"


# -- automatic pools -----------------------------------------------------------------------------


def test_an_automatic_pool_takes_its_vm_back_when_the_user_shuts_it_down(ready_pool, taken):
    pool = ready_pool(type=PoolType.AUTOMATIC)
    vm, user, client = taken(pool)

    assert client.post(f"/api/vms/{vm.pk}/shutdown/").status_code == 202
    run_queued_tasks()

    vm.refresh_from_db()
    assert vm.owner is None
    assert _vm_grants(client) == []
    assert Job.objects.get(vm=vm, kind=JobKind.REVERT).state == JobState.SUCCEEDED


def test_an_automatic_pool_vm_stopped_outside_corral_returns_when_the_sync_sees_it(
    ready_pool, taken
):
    pool = ready_pool(type=PoolType.AUTOMATIC)
    vm, user, client = taken(pool)
    write_marker(vm)

    driver.power_off(vm.host.uri, str(vm.uuid))
    sync.sync_host(vm.host_id)
    run_queued_tasks()

    vm.refresh_from_db()
    assert vm.owner is None
    assert _vm_grants(client) == []
    assert read_marker(vm) is None


def test_the_returned_vm_of_an_automatic_pool_is_prestarted_again(ready_pool, taken):
    pool = ready_pool(type=PoolType.AUTOMATIC, size=1, prestarted_vms=1)
    vm, user, client = taken(pool)

    client.post(f"/api/vms/{vm.pk}/shutdown/")
    run_queued_tasks()

    vm.refresh_from_db()
    assert (vm.status, vm.owner) == (VmStatus.UP, None)
    assert pool_vms(pool) == [vm]


def test_the_user_no_longer_finds_the_vm_after_it_returned(ready_pool, taken):
    pool = ready_pool(type=PoolType.AUTOMATIC)
    vm, user, client = taken(pool)

    client.post(f"/api/vms/{vm.pk}/shutdown/")
    run_queued_tasks()

    assert client.get(f"/api/vms/{vm.pk}/").status_code == 404


# -- manual pools --------------------------------------------------------------------------------


def test_a_manual_pool_vm_stays_with_its_user_after_shutdown(ready_pool, taken):
    pool = ready_pool(type=PoolType.MANUAL)
    vm, user, client = taken(pool)

    client.post(f"/api/vms/{vm.pk}/shutdown/")
    run_queued_tasks()

    shown = client.get(f"/api/vms/{vm.pk}/").json()
    assert (shown["status"], shown["owner"]) == ("down", user.username)
    assert _vm_grants(client) == [("UserRole", vm.pk)]
    assert not Job.objects.filter(vm=vm, kind=JobKind.REVERT).exists()


def test_a_manual_pool_vm_returns_when_an_admin_returns_it(ready_pool, taken, admin):
    pool = ready_pool(type=PoolType.MANUAL)
    vm, user, client = taken(pool)
    client.post(f"/api/vms/{vm.pk}/shutdown/")
    run_queued_tasks()

    response = _return(admin, vm)

    assert response.status_code == 202
    assert [job["kind"] for job in response.json()] == ["revert"]
    vm.refresh_from_db()
    assert vm.owner is None
    assert _vm_grants(client) == []


# -- who may return ------------------------------------------------------------------------------


@pytest.fixture
def held(pool_of, pool_user, client_for):
    """(pool, vm, owner) of a pool of rows whose first VM a user has just taken."""
    pool = pool_of(up=2)
    owner = pool_user(pool)
    response = client_for(owner).post(f"/api/vmpools/{pool.pk}/allocatevm/")
    return pool, VirtualMachine.objects.get(pk=response.json()["vm"]["id"]), owner


@pytest.mark.django_db
def test_another_user_of_the_pool_does_not_even_see_a_vm_they_do_not_hold(
    held, pool_user, client_for
):
    pool, vm, owner = held

    response = _return(client_for(pool_user(pool)), vm)

    assert response.status_code == 404
    assert VirtualMachine.objects.get(pk=vm.pk).owner == owner


@pytest.mark.django_db
def test_a_user_without_a_grant_cannot_find_the_vm_to_return(held, make_user, client_for):
    pool, vm, owner = held

    response = _return(client_for(make_user()), vm)

    assert response.status_code == 404
    assert VirtualMachine.objects.get(pk=vm.pk).owner == owner


@pytest.mark.django_db
def test_the_user_may_return_the_vm_they_hold(held, client_for):
    pool, vm, owner = held

    response = _return(client_for(owner), vm)

    assert response.status_code == 202, response.json()
    assert [job["kind"] for job in response.json()] == ["poweroff", "revert"]
    assert VirtualMachine.objects.get(pk=vm.pk).owner is None


@pytest.mark.django_db
def test_the_pool_admin_may_return_any_vm_of_the_pool(held, make_user, grant, client_for):
    pool, vm, owner = held
    pool_admin = make_user()
    grant(pool_admin, "PoolAdmin", pool)

    response = _return(client_for(pool_admin), vm)

    assert response.status_code == 202, response.json()
    assert VirtualMachine.objects.get(pk=vm.pk).owner is None


@pytest.mark.django_db
def test_a_vm_outside_every_pool_cannot_be_returned(make_vm, admin):
    vm = make_vm()

    response = _return(admin, vm)

    assert response.status_code == 409
    assert response.json()["detail"] == f"VM {vm.name} is not in a pool."


# -- what a stop says will follow ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("operation", ["shutdown", "poweroff"])
def test_stopping_a_vm_of_a_stateless_pool_answers_that_it_goes_back_reverted(
    held, client_for, operation
):
    pool, vm, owner = held

    response = client_for(owner).post(f"/api/vms/{vm.pk}/{operation}/")

    assert response.status_code == 202, response.json()
    assert response.json()["kind"] == operation
    assert response.json()["after_stop"] == {
        "code": "returned_and_reverted",
        "message": f"Once it is stopped, VM {vm.name} goes back to pool {pool.name} and its "
        "disk is reverted to the pool's base: everything written to it since it was taken "
        "is lost.",
    }


@pytest.mark.django_db
def test_stopping_a_vm_of_a_stateful_pool_answers_that_it_goes_back_as_it_is(
    pool_of, pool_user, client_for
):
    pool = pool_of(up=1, stateless=False)
    owner = pool_user(pool)
    client = client_for(owner)
    vm_id = client.post(f"/api/vmpools/{pool.pk}/allocatevm/").json()["vm"]["id"]

    response = client.post(f"/api/vms/{vm_id}/shutdown/")

    assert response.status_code == 202, response.json()
    assert response.json()["after_stop"]["code"] == "returned_to_pool"
    assert "as it is, for others to take" in response.json()["after_stop"]["message"]


@pytest.mark.django_db
def test_stopping_a_vm_that_only_stops_answers_nothing_follows(make_vm, admin):
    manual = make_vm(status=VmStatus.UP)

    response = admin.post(f"/api/vms/{manual.pk}/shutdown/")

    assert response.status_code == 202, response.json()
    assert response.json()["after_stop"] is None


@pytest.mark.django_db
def test_the_schema_documents_what_follows_a_stop():
    from rest_framework.test import APIClient

    schema = APIClient().get("/api/schema/", {"format": "json"}).json()

    for operation in ("shutdown", "poweroff"):
        answer = schema["paths"][f"/api/vms/{{id}}/{operation}/"]["post"]
        assert "goes back to its pool" in answer["description"]
        ref = answer["responses"]["202"]["content"]["application/json"]["schema"]["$ref"]
        fields = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]
        assert "after_stop" in fields
        assert "reverted" in fields["after_stop"]["description"]
