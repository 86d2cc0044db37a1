"""VMs in the admin console: start, shut down, power off, migrate and return to pool as
actions, each checked per VM, and a refusal reported per VM instead of an error page."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings
from django.db import connection, transaction

from hosts import driver, jobs
from hosts.models import Job, JobKind, VirtualMachine
from hosts.operations import OPERATION_BY_KIND
from pools import monitor
from project.models import Event
from tests.conftest import lock_waiters, wait_until
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db
LABEL = "hosts.VirtualMachine"


@pytest.fixture
def vm_up(make_vm, make_host, cluster_a):
    host = make_host(cluster_a, name="kvm-1", status="up")
    return make_vm(cluster_a, name="web-1", host=host, status="up")


@pytest.fixture
def vm_down(make_vm, cluster_a):
    return make_vm(cluster_a, name="db-1", status="down")


def test_start_queues_a_start_job_for_each_selected_vm(superuser_console, vm_down, admin_user):
    response = run_action(superuser_console, LABEL, "start", [vm_down])

    job = Job.objects.get(vm=vm_down)
    assert (job.kind, job.state, job.requested_by) == (JobKind.START, "pending", admin_user)
    assert (
        "success",
        f"Start queued for 1 VM(s): db-1 (job #{job.pk}).",
    ) in shown_messages(response)


@pytest.mark.parametrize(
    ("action", "kind"),
    [("shut_down", JobKind.SHUTDOWN), ("power_off", JobKind.POWEROFF), ("migrate", "migrate")],
)
def test_each_operation_queues_its_job(superuser_console, vm_up, action, kind):
    run_action(superuser_console, LABEL, action, [vm_up])

    job = Job.objects.get(vm=vm_up)
    assert job.kind == kind
    assert job.params == {}  # a migration without a destination: the scheduler picks it


def test_a_refused_operation_is_an_error_message_for_that_vm_only(
    superuser_console, vm_up, vm_down
):
    response = run_action(superuser_console, LABEL, "start", [vm_up, vm_down])

    assert response.status_code == 200
    messages = shown_messages(response)
    assert ("error", "VM web-1 is Up; it cannot start from there.") in messages
    assert any(level == "success" and "db-1" in text for level, text in messages)
    assert not Job.objects.filter(vm=vm_up).exists()
    assert Job.objects.filter(vm=vm_down, kind=JobKind.START).exists()


def test_an_operation_the_user_may_not_perform_on_a_vm_is_refused_for_it(
    staff_with_role, vm_up, cluster_a, grant
):
    other = VirtualMachine.objects.create(
        name="web-2",
        cluster=cluster_a,
        template=vm_up.template,
        host=vm_up.host,
        status="up",
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
    )
    user = staff_with_role(["hosts.view_virtualmachine"], cluster_a)
    grant(user, "UserVmManager", other)

    response = run_action(logged_in(user), LABEL, "power_off", [vm_up, other])

    messages = shown_messages(response)
    assert ("error", "You may not power off VM web-1.") in messages
    assert not Job.objects.filter(vm=vm_up).exists()
    assert Job.objects.filter(vm=other, kind=JobKind.POWEROFF).exists()


def test_migrate_needs_the_migrate_action_on_the_vm(staff_with_role, vm_up, cluster_a, grant):
    user = staff_with_role(["hosts.view_virtualmachine", "hosts.migrate_virtualmachine"], vm_up)
    grant(user, "UserRole", cluster_a)  # operate, but not migrate, on the rest of the cluster
    other = VirtualMachine.objects.create(
        name="web-3",
        cluster=cluster_a,
        template=vm_up.template,
        host=vm_up.host,
        status="up",
        vcpus=1,
        memory_mb=128,
        disk_gb=1,
    )

    response = run_action(logged_in(user), LABEL, "migrate", [vm_up, other])

    assert ("error", "You may not migrate VM web-3.") in shown_messages(response)
    assert list(Job.objects.values_list("vm__name", "kind")) == [("web-1", "migrate")]


def test_a_cluster_admin_cannot_act_on_a_vm_of_another_cluster(
    console_of_a, make_vm, cluster_b, cluster_a
):
    make_vm(cluster_a, name="vm-a")
    vm_b = make_vm(cluster_b, name="vm-b", status="down")

    run_action(console_of_a, LABEL, "start", [vm_b])

    assert not Job.objects.filter(vm=vm_b).exists()


# --- return to pool -----------------------------------------------------------------------


@pytest.fixture
def taken_vm(make_pool, make_vm, make_user, cluster_a, grant):
    """An Up VM of a stateful pool, held by a user."""
    pool = make_pool(cluster_a, name="lab", size=1, stateless=False)
    user = make_user("alice")
    vm = make_vm(cluster_a, template=pool.template, name="lab-1", pool=pool, owner=user)
    grant(user, "UserRole", vm)
    return vm


def test_return_to_pool_takes_the_vm_from_its_user(superuser_console, taken_vm):
    response = run_action(superuser_console, LABEL, "return_to_pool", [taken_vm])

    taken_vm.refresh_from_db()
    assert taken_vm.owner is None
    assert ("success", "Returned 1 VM(s) to their pools: lab-1.") in shown_messages(response)


def test_returning_a_vm_that_is_in_no_pool_is_an_error_message(superuser_console, vm_down):
    response = run_action(superuser_console, LABEL, "return_to_pool", [vm_down])

    assert response.status_code == 200
    assert ("error", "VM db-1 is not in a pool.") in shown_messages(response)


def test_a_pool_admin_of_another_pool_may_not_return_the_vm(
    staff_with_role, taken_vm, cluster_a, make_pool, grant
):
    user = staff_with_role(["hosts.view_virtualmachine"], cluster_a)
    grant(user, "PoolAdmin", make_pool(cluster_a, name="other-lab"))

    response = run_action(logged_in(user), LABEL, "return_to_pool", [taken_vm])

    taken_vm.refresh_from_db()
    assert taken_vm.owner is not None
    assert ("error", "You may not return VM lab-1 to its pool.") in shown_messages(response)


# --- deleting goes through the VM service ------------------------------------------------


def test_deleting_a_running_vm_from_its_page_is_refused(superuser_console, vm_up):
    response = superuser_console.post(
        admin_url(LABEL, "delete", vm_up.pk), {"post": "yes"}, follow=True
    )

    assert VirtualMachine.objects.filter(pk=vm_up.pk).exists()
    assert (
        "error",
        "Not deleted: VM web-1 is Up; shut it down before deleting it.",
    ) in shown_messages(response)


def test_deleting_selected_vms_deletes_the_stopped_ones_and_refuses_the_running_ones(
    superuser_console, vm_up, vm_down
):
    response = run_action(superuser_console, LABEL, "delete_selected", [vm_up, vm_down], post="yes")

    assert list(VirtualMachine.objects.values_list("name", flat=True)) == ["web-1"]
    messages = shown_messages(response)
    assert ("success", "Deleted 1 VM(s): db-1.") in messages
    assert any(level == "error" and "web-1" in text for level, text in messages)


def test_deleting_selected_vms_first_asks_for_confirmation(superuser_console, vm_down):
    response = run_action(superuser_console, LABEL, "delete_selected", [vm_down])

    assert response.status_code == 200
    assert "Are you sure" in response.content.decode()
    assert VirtualMachine.objects.filter(pk=vm_down.pk).exists()


# --- for real, on the simulated hosts ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_migrate_moves_a_running_vm_to_the_host_the_scheduler_picks(running_vm, admin_user):
    vm = running_vm()
    source = vm.host

    run_action(logged_in(admin_user), LABEL, "migrate", [vm])
    job = Job.objects.get(vm=vm, kind=JobKind.MIGRATE)
    outcome = jobs.run(job.pk, OPERATION_BY_KIND)

    vm.refresh_from_db()
    assert outcome == "succeeded", Job.objects.get(pk=job.pk).error_message
    assert vm.host_id != source.pk
    assert str(vm.uuid) in {d.uuid for d in driver.host_report(vm.host.uri).domains}
    assert Job.objects.get(pk=job.pk).result["to"] == vm.host.name


def test_a_vm_added_in_the_admin_is_managed_by_its_creator(
    make_cluster, make_template, make_user, grant
):
    from django.test import Client

    from hosts.models import VirtualMachine
    from project.access.permissions import holds

    cluster, template = make_cluster(), make_template()
    creator = make_user(is_staff=True)
    grant(creator, "PowerUser", cluster)
    client = Client()
    client.force_login(creator)

    response = client.post(
        "/admin/hosts/virtualmachine/add/",
        {
            "name": "made-in-admin",
            "cluster": cluster.pk,
            "template": template.pk,
            "vcpus": 1,
            "memory_mb": 256,
            "disk_gb": 1,
            "description": "",
        },
    )

    assert response.status_code == 302, response.content.decode()[-3000:]
    vm = VirtualMachine.objects.get(name="made-in-admin")
    assert vm.owner == creator
    assert holds(creator, "hosts.delete_virtualmachine", vm)


# --- fields only the services set ----------------------------------------------------------


def _change_form(vm, **changes) -> dict:
    """A post of the VM's change form, with ``changes`` on top: its editable fields, and the
    fields a page that let them change would post too (the console ignores them)."""
    return {
        "name": vm.name,
        "description": vm.description,
        "vcpus": vm.vcpus,
        "memory_mb": vm.memory_mb,
        "disk_gb": vm.disk_gb,
        "pinned_host": "",
        "cluster": vm.cluster_id,
        "template": vm.template_id,
        "owner": vm.owner_id or "",
        "pool": vm.pool_id or "",
        "reservation": "",
        **changes,
    }


def test_a_vms_page_shows_its_owner_and_pool_without_letting_them_change(
    superuser_console, taken_vm
):
    response = superuser_console.get(admin_url(LABEL, "change", taken_vm.pk))

    page = response.content.decode()
    assert response.status_code == 200
    assert "alice" in page and "lab" in page
    for field in ("owner", "pool", "reservation", "cluster", "template"):
        assert f'name="{field}"' not in page, field


def test_saving_a_vms_page_cannot_hand_the_vm_to_another_user(
    superuser_console, taken_vm, make_user, make_pool, cluster_a
):
    alice = taken_vm.owner
    mallory = make_user("mallory")
    other_pool = make_pool(cluster_a, name="other-lab", size=1)

    response = superuser_console.post(
        admin_url(LABEL, "change", taken_vm.pk),
        _change_form(
            taken_vm,
            description="renamed in the console",
            owner=mallory.pk,
            pool=other_pool.pk,
        ),
    )

    assert response.status_code == 302, response.content.decode()[-3000:]
    taken_vm.refresh_from_db()
    assert taken_vm.description == "renamed in the console"
    assert (taken_vm.owner, taken_vm.pool.name) == (alice, "lab")
    assert not VirtualMachine.objects.filter(owner=mallory).exists()


@pytest.mark.django_db(transaction=True)
def test_saving_a_vms_page_keeps_an_owner_the_vm_was_given_meanwhile(
    superuser_console, taken_vm, make_user
):
    if connection.vendor != "postgresql":
        pytest.skip("holding the VM's row while the page saves needs PostgreSQL's row locks")
    bob = make_user("bob")
    holding, release = threading.Event(), threading.Event()
    outcome = {}

    def give_the_vm_to_bob() -> None:  # as a return then an allocation would, still open
        try:
            with transaction.atomic():
                VirtualMachine.objects.filter(pk=taken_vm.pk).update(owner=bob)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    def save_the_page() -> None:
        try:
            outcome["response"] = superuser_console.post(
                admin_url(LABEL, "change", taken_vm.pk),
                _change_form(taken_vm, description="noted in the console"),
            )
        finally:
            connection.close()

    giver = threading.Thread(target=give_the_vm_to_bob)
    giver.start()
    assert holding.wait(10)
    saver = threading.Thread(target=save_the_page)
    saver.start()
    try:
        wait_until(lock_waiters, timeout=30, message="the save never waited")
    finally:
        release.set()
        giver.join(30)
        saver.join(30)

    assert outcome["response"].status_code == 302
    taken_vm.refresh_from_db()
    assert (taken_vm.description, taken_vm.owner) == ("noted in the console", bob)


# --- prestart failures -------------------------------------------------------------------


@pytest.fixture
def given_up_vm(make_pool, make_vm, cluster_a):
    """A stopped VM of a pool that wants one prestarted, which the pool gave up prestarting."""
    pool = make_pool(cluster_a, name="lab", size=1, prestarted_vms=1, stateless=False)
    return make_vm(
        cluster_a,
        template=pool.template,
        name="lab-1",
        pool=pool,
        status="down",
        prestart_failures=settings.VMPOOL_MONITOR_MAX_ATTEMPTS,
    )


def test_clearing_prestart_failures_lets_the_pool_prestart_the_vm_again(
    superuser_console, given_up_vm
):
    assert monitor.run_for_pool(given_up_vm.pool_id) == 0

    response = run_action(superuser_console, LABEL, "clear_prestart_failures", [given_up_vm])

    given_up_vm.refresh_from_db()
    assert given_up_vm.prestart_failures == 0
    assert (
        "success",
        "Cleared prestart failures of 1 VM(s): lab-1; their pools may prestart them again.",
    ) in shown_messages(response)
    assert monitor.run_for_pool(given_up_vm.pool_id) == 1
    assert Job.objects.filter(vm=given_up_vm, kind=JobKind.START).exists()


def test_clearing_prestart_failures_needs_the_change_action_on_the_vm(
    staff_with_role, given_up_vm, cluster_a, make_vm, grant
):
    other = make_vm(
        cluster_a, template=given_up_vm.template, name="lab-9", status="down", prestart_failures=3
    )
    user = staff_with_role(["hosts.view_virtualmachine"], cluster_a)
    grant(user, "UserVmManager", other)

    response = run_action(logged_in(user), LABEL, "clear_prestart_failures", [given_up_vm, other])

    messages = shown_messages(response)
    assert ("error", "You may not clear prestart failures of VM lab-1.") in messages
    assert any(level == "success" and "lab-9" in text for level, text in messages)
    given_up_vm.refresh_from_db()
    other.refresh_from_db()
    assert (given_up_vm.prestart_failures, other.prestart_failures) == (3, 0)


# --- VMs held for the admins --------------------------------------------------------------


@pytest.fixture
def pool_vm_down(make_pool, make_vm, cluster_a):
    pool = make_pool(cluster_a, name="hold-lab", size=1, stateless=False)
    return make_vm(cluster_a, template=pool.template, name="hold-lab-1", pool=pool, status="down")


def test_starting_a_pool_vm_from_the_console_holds_it_for_the_admins(
    superuser_console, pool_vm_down
):
    run_action(superuser_console, LABEL, "start", [pool_vm_down])

    pool_vm_down.refresh_from_db()
    assert pool_vm_down.admin_hold is True
    listed = superuser_console.get(admin_url(LABEL, "changelist"), {"admin_hold__exact": "1"})
    assert [vm.name for vm in listed.context["cl"].result_list] == ["hold-lab-1"]


def test_a_pool_vms_page_releases_its_hold_and_says_so_in_the_feed(
    superuser_console, pool_vm_down, admin_user
):
    VirtualMachine.objects.filter(pk=pool_vm_down.pk).update(admin_hold=True)
    pool_vm_down.refresh_from_db()
    page = superuser_console.get(admin_url(LABEL, "change", pool_vm_down.pk)).content.decode()

    response = superuser_console.post(
        admin_url(LABEL, "change", pool_vm_down.pk), _change_form(pool_vm_down)
    )

    assert 'name="admin_hold"' in page and "checked" in page.split('name="admin_hold"')[1][:80]
    assert response.status_code == 302, response.content.decode()[-3000:]
    pool_vm_down.refresh_from_db()
    assert pool_vm_down.admin_hold is False
    assert Event.objects.filter(
        object_id=pool_vm_down.pk,
        message=f"VM hold-lab-1 was released by {admin_user.username}; "
        "its pool may hand it out again",
    ).exists()


def test_a_vm_in_no_pool_shows_no_hold_to_change(superuser_console, vm_down):
    page = superuser_console.get(admin_url(LABEL, "change", vm_down.pk)).content.decode()

    response = superuser_console.post(
        admin_url(LABEL, "change", vm_down.pk), {**_change_form(vm_down), "admin_hold": "on"}
    )

    assert 'name="admin_hold"' not in page
    assert response.status_code == 302
    vm_down.refresh_from_db()
    assert vm_down.admin_hold is False
