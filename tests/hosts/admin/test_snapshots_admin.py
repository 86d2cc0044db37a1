"""VMs' snapshots in the admin console: each VM's on its page and everyone's in a list of their
own (by kind, state, VM and name), reverting to one and deleting one through the snapshot
services (a job queued, a refusal as a message), and only for those who may operate the VM."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from hosts.models import Job, JobKind, SnapshotStatus, VmSnapshot
from tests.project.admin.fixtures import admin_url, logged_in, run_action, shown_messages

pytestmark = pytest.mark.django_db
LABEL = "hosts.VmSnapshot"


@pytest.fixture
def vm_a(make_vm, make_host, make_user, cluster_a):
    host = make_host(cluster_a, name="kvm-a", status="up")
    return make_vm(cluster_a, name="web-1", host=host, status="up", owner=make_user("alice"))


@pytest.fixture
def vm_b(make_vm, make_host, make_user, cluster_b):
    host = make_host(cluster_b, name="kvm-b", status="up")
    return make_vm(cluster_b, name="db-1", host=host, status="up", owner=make_user("bob"))


def snapshot_of(vm, name: str, **fields) -> VmSnapshot:
    fields.setdefault("status", SnapshotStatus.READY)
    return VmSnapshot.objects.create(vm=vm, name=name, owner=vm.owner, **fields)


def revert_url(snapshot) -> str:
    return reverse("admin:hosts_vmsnapshot_revert_one", args=[snapshot.pk])


def delete_url(snapshot) -> str:
    return reverse("admin:hosts_vmsnapshot_delete_one", args=[snapshot.pk])


def names_listed(response) -> list[str]:
    return [snapshot.name for snapshot in response.context["cl"].result_list]


def snapshot_rows(page: str) -> dict[str, str]:
    """The VM page's snapshot table: each row's text by snapshot name."""
    table = page[page.index('id="vm-snapshots"') :]
    rows = re.findall(r'<tr data-snapshot="([^"]+)".*?</tr>', table, re.S)
    cells = re.findall(r'<tr data-snapshot="[^"]+".*?</tr>', table, re.S)
    return {name: re.sub(r"<[^>]+>", " ", cell) for name, cell in zip(rows, cells, strict=True)}


def test_a_vms_page_lists_its_snapshots_in_words(superuser_console, vm_a):
    snapshot_of(vm_a, "before-upgrade", memory=True, current=True, size_bytes=12_345_678)
    snapshot_of(vm_a, "nightly", status=SnapshotStatus.TAKING)

    page = superuser_console.get(admin_url("hosts.VirtualMachine", "change", vm_a.pk))

    assert page.status_code == 200
    html = page.content.decode()
    rows = snapshot_rows(html)
    assert "Snapshots (2)" in html
    for words in ("with memory", "yes: the VM was last", "11.8\xa0MB", "alice", "Ready"):
        assert words in rows["before-upgrade"]
    for words in ("disk only", "not known yet", "Being taken"):
        assert words in rows["nightly"]
    assert "Revert to" in rows["before-upgrade"] and "Revert to" not in rows["nightly"]
    assert "owner (whose quota)" in html and "size on the host" in html


def test_reverting_from_the_vms_page_asks_first_then_queues_its_job(
    superuser_console, admin_user, vm_a
):
    snapshot = snapshot_of(vm_a, "known-good")

    asked = superuser_console.get(revert_url(snapshot))
    done = superuser_console.post(revert_url(snapshot), {"post": "yes"}, follow=True)

    assert "everything written to it since is lost, and the VM is left shut off" in (
        asked.content.decode()
    )
    job = Job.objects.get(vm=vm_a)
    assert (job.kind, job.params, job.requested_by) == (
        JobKind.SNAPSHOT_REVERT,
        {"snapshot": snapshot.pk},
        admin_user,
    )
    assert done.redirect_chain == [(admin_url("hosts.VirtualMachine", "change", vm_a.pk), 302)]
    assert ("success", f"VM web-1 goes back to snapshot known-good (job #{job.pk}).") in (
        shown_messages(done)
    )


def test_the_confirmation_page_changes_nothing(superuser_console, vm_a):
    snapshot = snapshot_of(vm_a, "kept", memory=True)

    asked = superuser_console.get(delete_url(snapshot))

    assert asked.status_code == 200
    assert "It is deleted from the VM&#x27;s disk" in asked.content.decode()
    assert not Job.objects.exists()
    assert VmSnapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.READY


def test_deleting_from_the_vms_page_queues_its_job(superuser_console, vm_a):
    snapshot = snapshot_of(vm_a, "old")

    done = superuser_console.post(delete_url(snapshot), {"post": "yes"}, follow=True)

    job = Job.objects.get(vm=vm_a)
    assert job.kind == JobKind.SNAPSHOT_DELETE
    assert VmSnapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.DELETING
    assert ("success", f"Snapshot old of VM web-1 is being deleted (job #{job.pk}).") in (
        shown_messages(done)
    )


def test_a_refusal_is_an_error_message_and_queues_nothing(superuser_console, vm_a):
    going = snapshot_of(vm_a, "going", status=SnapshotStatus.DELETING)

    done = superuser_console.post(revert_url(going), {"post": "yes"}, follow=True)

    assert ("error", "Snapshot going is being deleted.") in shown_messages(done)
    assert not Job.objects.exists()


def test_everyones_snapshots_are_listed_for_the_superuser_by_kind_state_and_search(
    superuser_console, vm_a, vm_b
):
    snapshot_of(vm_a, "a-memory", memory=True)
    snapshot_of(vm_a, "a-taking", status=SnapshotStatus.TAKING)
    snapshot_of(vm_b, "b-disk")
    changelist = admin_url(LABEL, "changelist")

    everyone = superuser_console.get(changelist)
    with_memory = superuser_console.get(changelist, {"kind": "memory"})
    disk_only = superuser_console.get(changelist, {"kind": "disk"})
    taking = superuser_console.get(changelist, {"status__exact": "taking"})
    by_vm = superuser_console.get(changelist, {"q": "db-1"})

    assert sorted(names_listed(everyone)) == ["a-memory", "a-taking", "b-disk"]
    assert names_listed(with_memory) == ["a-memory"]
    assert sorted(names_listed(disk_only)) == ["a-taking", "b-disk"]
    assert names_listed(taking) == ["a-taking"]
    assert names_listed(by_vm) == ["b-disk"]
    assert "VM snapshots" in everyone.content.decode()


def test_the_lists_actions_ask_then_revert_and_delete_each_through_its_service(
    superuser_console, vm_a, vm_b
):
    first = snapshot_of(vm_a, "first")
    second = snapshot_of(vm_a, "second")
    theirs = snapshot_of(vm_b, "theirs")

    asked = run_action(superuser_console, LABEL, "revert_to_snapshots", [first, theirs])
    reverted = run_action(
        superuser_console, LABEL, "revert_to_snapshots", [first, second, theirs], post="yes"
    )
    deleted = run_action(superuser_console, LABEL, "delete_snapshots", [second], post="yes")

    assert 'id="snapshots-to-confirm"' in asked.content.decode()
    assert sorted(Job.objects.values_list("vm__name", "kind", "params")) == [
        ("db-1", JobKind.SNAPSHOT_REVERT, {"snapshot": theirs.pk}),
        ("web-1", JobKind.SNAPSHOT_DELETE, {"snapshot": second.pk}),
        ("web-1", JobKind.SNAPSHOT_REVERT, {"snapshot": first.pk}),
    ]
    assert (
        "error",
        "VM web-1 is reverted to one snapshot only: second was left out.",
    ) in shown_messages(reverted)
    assert any(
        text.startswith("Snapshot second of VM web-1 is being deleted")
        for _, text in (shown_messages(deleted))
    )


def test_a_cluster_admin_sees_and_acts_on_their_clusters_snapshots_only(console_of_a, vm_a, vm_b):
    mine = snapshot_of(vm_a, "mine")
    other = snapshot_of(vm_b, "other")

    listed = console_of_a.get(admin_url(LABEL, "changelist"))
    refused = [
        console_of_a.get(revert_url(other)),
        console_of_a.post(revert_url(other), {"post": "yes"}),
        console_of_a.post(delete_url(other), {"post": "yes"}),
    ]
    other_page = console_of_a.get(admin_url(LABEL, "change", other.pk))
    run_action(console_of_a, LABEL, "delete_snapshots", [other], post="yes")
    allowed = console_of_a.post(delete_url(mine), {"post": "yes"})

    assert names_listed(listed) == ["mine"]
    assert [response.status_code for response in refused] == [404, 404, 404]
    assert other_page.status_code == 302  # the admin's "does not exist", back to its index
    assert allowed.status_code == 302
    assert list(Job.objects.values_list("vm__name", flat=True)) == ["web-1"]
    assert VmSnapshot.objects.get(pk=other.pk).status == SnapshotStatus.READY


def test_a_user_who_may_only_view_a_vm_sees_none_of_its_snapshots(staff_with_role, vm_a):
    snapshot = snapshot_of(vm_a, "not-for-viewers")
    viewer = logged_in(staff_with_role(["hosts.view_virtualmachine"], vm_a))

    vm_page = viewer.get(admin_url("hosts.VirtualMachine", "change", vm_a.pk))
    answers = [
        viewer.get(admin_url(LABEL, "changelist")),
        viewer.get(revert_url(snapshot)),
        viewer.post(delete_url(snapshot), {"post": "yes"}),
    ]

    assert vm_page.status_code == 200
    assert "not-for-viewers" not in vm_page.content.decode()
    assert 'id="vm-snapshots"' not in vm_page.content.decode()
    assert [answer.status_code for answer in answers] == [403, 404, 404]
    assert not Job.objects.exists()


def test_someone_not_staff_is_sent_to_the_admins_login(make_user, grant, vm_a):
    user = make_user()
    grant(user, "UserRole", vm_a)  # may operate it, in the portal
    snapshot = snapshot_of(vm_a, "theirs")
    client = logged_in(user)

    for url in (admin_url(LABEL, "changelist"), revert_url(snapshot)):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response.url, url
    response = client.post(delete_url(snapshot), {"post": "yes"})
    assert response.status_code == 302 and "/admin/login/" in response.url
    assert not Job.objects.exists()


def test_snapshots_have_no_add_change_or_plain_delete_in_the_admin(superuser_console, vm_a):
    snapshot = snapshot_of(vm_a, "read-only")

    page = superuser_console.get(admin_url(LABEL, "change", snapshot.pk)).content.decode()
    added = superuser_console.get(admin_url(LABEL, "add"))
    changed = superuser_console.post(admin_url(LABEL, "change", snapshot.pk), {"name": "renamed"})

    assert added.status_code == 403 and changed.status_code == 403
    assert 'name="_save"' not in page
    assert (
        'name="action" value="delete_selected"'
        not in superuser_console.get(admin_url(LABEL, "changelist")).content.decode()
    )
    assert VmSnapshot.objects.get(pk=snapshot.pk).name == "read-only"


def test_the_snapshot_list_takes_as_many_queries_for_many_rows_as_for_few(
    superuser_console, vm_a, make_vm, make_user, cluster_a
):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = superuser_console.get(admin_url(LABEL, "changelist"))
        assert response.status_code == 200
        return len(captured)

    snapshot_of(vm_a, "one")
    few = queries()
    for n in range(8):
        vm = make_vm(cluster_a, host=vm_a.host, status="up", owner=make_user())
        snapshot_of(vm, f"s-{n}")
    many = queries()

    assert many == few
    assert re.search(
        r"\b9 VM snapshots\b",
        superuser_console.get(admin_url(LABEL, "changelist")).content.decode(),
    )
