"""A VM's snapshots on its page in the portal: the list its holder sees, taking one from the form,
reverting to one and deleting one (each a job queued), refusals shown on the form with nothing
taken, and nothing of it for someone who may not operate the VM."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from django.test import Client
from django.utils import timezone

from hosts.models import Job, JobKind, Quota, SnapshotStatus, VirtualMachine, VmSnapshot, VmStatus
from tests.hosts.fixtures import run_pending_jobs
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def vm(make_vm, make_host, make_cluster):
    """An Up VM on a host (so it has a disk to snapshot)."""
    cluster = make_cluster()
    return make_vm(cluster, host=make_host(cluster, status="up"), status=VmStatus.UP)


@pytest.fixture
def holder(make_user, grant):
    """holder(vm) -> its user (UserRole on it: may operate it), as a pool's holder is."""

    def make(vm):
        user = make_user()
        grant(user, "UserRole", vm)
        VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
        vm.owner = user
        return user

    return make


def snapshot_of(vm, name: str, **fields) -> VmSnapshot:
    """A snapshot row of ``vm`` as its job leaves it once taken (ready), unless told."""
    fields.setdefault("status", SnapshotStatus.READY)
    fields.setdefault("owner", vm.owner)
    return VmSnapshot.objects.create(vm=vm, name=name, **fields)


def take(client, vm, **fields):
    data = {f"snapshot-{name}": value for name, value in fields.items()}
    return client.post(f"/vms/{vm.pk}/snapshots/take/", data)


def memory_checkbox(page: str) -> str:
    return re.search(r'<input[^>]*name="snapshot-memory"[^>]*>', page).group(0)


def form_errors(response) -> dict:
    return response.context["snapshot_section"]["form"].errors


def test_the_holder_sees_each_snapshot_with_when_its_kind_size_state_and_the_current_one(
    vm, holder
):
    user = holder(vm)
    known = snapshot_of(vm, "before-upgrade", memory=True, current=True, size_bytes=12_345_678)
    taking = snapshot_of(vm, "nightly", description="<b>bold</b>", status=SnapshotStatus.TAKING)
    at = datetime(2026, 3, 4, 5, 6, tzinfo=timezone.get_current_timezone())
    VmSnapshot.objects.filter(pk=known.pk).update(created_at=at)

    page = signed_in(user).get(f"/vms/{vm.pk}/").content.decode()

    assert 'id="vm-snapshots"' in page
    first = page[page.index(f'id="snapshot-{known.pk}"') : page.index(f'id="snapshot-{taking.pk}"')]
    second = page[page.index(f'id="snapshot-{taking.pk}"') :]
    assert 'data-current="1"' in first and "(current)" in first
    assert "2026-03-04 05:06" in first and "With memory" in first
    assert "11.8\xa0MB" in first  # filesizeformat's units
    assert ">Ready<" in first and 'data-operation="snapshot-revert"' in first
    assert 'data-current="0"' in second and "Disk only" in second and "not known yet" in second
    assert ">Being taken<" in second and 'data-operation="snapshot-revert"' not in second
    assert "&lt;b&gt;bold&lt;/b&gt;" in second and "<b>bold</b>" not in page


def test_the_list_alone_is_what_the_page_refreshes(vm, holder):
    user = holder(vm)
    snapshot_of(vm, "one")

    fragment = signed_in(user).get(f"/vms/{vm.pk}/snapshots/")

    assert fragment.status_code == 200
    assert 'data-snapshot="one"' in fragment.content.decode()
    assert "<html" not in fragment.content.decode()


def test_taking_a_snapshot_from_the_page_queues_its_job_and_lists_it_as_being_taken(vm, holder):
    user = holder(vm)
    client = signed_in(user)

    response = take(client, vm, name="before-upgrade", description="known good", memory="on")
    page = client.get(f"/vms/{vm.pk}/").content.decode()

    assert response.status_code == 302 and response.url == f"/vms/{vm.pk}/"
    snapshot = VmSnapshot.objects.get(vm=vm)
    job = Job.objects.get(vm=vm)
    assert (snapshot.name, snapshot.description, snapshot.memory, snapshot.owner) == (
        "before-upgrade",
        "known good",
        True,
        user,
    )
    assert snapshot.status == SnapshotStatus.TAKING
    assert (job.kind, job.state, job.requested_by, job.params) == (
        JobKind.SNAPSHOT,
        "pending",
        user,
        {"snapshot": snapshot.pk},
    )
    assert 'data-snapshot="before-upgrade"' in page and ">Being taken<" in page
    assert f'id="job-{job.pk}"' in page  # followed in the page's jobs


@pytest.mark.django_db(transaction=True)
def test_snapshots_taken_on_a_simulated_host_show_ready_and_the_last_one_current(
    running_vm, holder
):
    vm = running_vm()
    client = signed_in(holder(vm))
    take(client, vm, name="first", memory="on")
    take(client, vm, name="second")
    run_pending_jobs()

    fragment = client.get(f"/vms/{vm.pk}/snapshots/").content.decode()

    rows = re.findall(r'data-snapshot="(\w+)" data-status="(\w+)" data-current="(\d)"', fragment)
    assert rows == [("first", "ready", "0"), ("second", "ready", "1")]
    assert fragment.count('data-operation="snapshot-revert"') == 2


def test_taking_says_so_in_a_message(vm, holder):
    client = signed_in(holder(vm))

    response = take(client, vm, name="nightly")

    job = Job.objects.get(vm=vm)
    assert messages_of(client.get(response.url)) == [
        f"Snapshot nightly of VM {vm.name} is being taken (job {job.pk})."
    ]
    assert VmSnapshot.objects.get(vm=vm).memory is False


def test_reverting_queues_its_job_and_says_so(vm, holder):
    user = holder(vm)
    snapshot = snapshot_of(vm, "known-good")
    client = signed_in(user)

    response = client.post(f"/vms/{vm.pk}/snapshots/{snapshot.pk}/revert/", follow=True)

    job = Job.objects.get(vm=vm)
    assert response.redirect_chain == [(f"/vms/{vm.pk}/", 302)]
    assert (job.kind, job.params, job.requested_by) == (
        JobKind.SNAPSHOT_REVERT,
        {"snapshot": snapshot.pk},
        user,
    )
    assert messages_of(response) == [
        f"VM {vm.name} goes back to snapshot known-good (job {job.pk})."
    ]


def test_deleting_queues_its_job_and_shows_the_snapshot_being_deleted(vm, holder):
    user = holder(vm)
    snapshot = snapshot_of(vm, "old")
    client = signed_in(user)

    response = client.post(f"/vms/{vm.pk}/snapshots/{snapshot.pk}/delete/", follow=True)

    job = Job.objects.get(vm=vm)
    page = response.content.decode()
    assert (job.kind, job.params) == (JobKind.SNAPSHOT_DELETE, {"snapshot": snapshot.pk})
    assert messages_of(response) == [
        f"Snapshot old of VM {vm.name} is being deleted (job {job.pk})."
    ]
    row = page[page.index(f'id="snapshot-{snapshot.pk}"') :]
    assert ">Being deleted<" in row and 'data-operation="snapshot-delete"' not in row


def test_revert_and_delete_ask_first_saying_what_is_lost(vm, holder):
    user = holder(vm)
    snapshot_of(vm, "with-memory", memory=True)
    snapshot_of(vm, "disk-only")

    page = signed_in(user).get(f"/vms/{vm.pk}/").content.decode()

    assert f'data-confirm="Revert VM {vm.name} to snapshot with-memory?"' in page
    assert (
        "running where it was then. Everything it did and wrote to its disk since is lost." in page
    )
    assert (
        "everything written to it since is lost. This snapshot has no memory: the VM is left "
        in (page)
    )
    assert 'data-confirm="Delete snapshot disk-only?"' in page


def test_a_refused_revert_is_a_message_and_queues_nothing(vm, holder):
    user = holder(vm)
    snapshot = snapshot_of(vm, "going", status=SnapshotStatus.DELETING)

    response = signed_in(user).post(f"/vms/{vm.pk}/snapshots/{snapshot.pk}/revert/", follow=True)

    assert messages_of(response) == ["Snapshot going is being deleted."]
    assert not Job.objects.exists()


# -- refusals on the form ----------------------------------------------------------------------


def test_a_name_taken_is_shown_beside_the_name_and_takes_nothing(vm, holder):
    user = holder(vm)
    snapshot_of(vm, "taken")

    response = take(signed_in(user), vm, name="taken")

    assert response.status_code == 400
    assert form_errors(response) == {"name": [f"VM {vm.name} has a snapshot named taken already."]}
    page = response.content.decode()
    assert 'id="field-snapshot-name"' in page and "field-error" in page
    assert 'value="taken"' in page  # what was typed stays
    assert VmSnapshot.objects.count() == 1 and not Job.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": ""}, "name", "Give the snapshot a name."),
        ({"name": "a b/c"}, "name", "Use letters, digits, '.', '_' and '-', starting with a"),
        ({"name": "x" * 65}, "name", "at most 64 characters (it has 65)"),
        ({"name": "ok", "description": "d" * 2001}, "description", "at most 2000 characters"),
    ],
)
def test_bad_input_is_shown_on_its_field_and_takes_nothing(vm, holder, fields, field, message):
    response = take(signed_in(holder(vm)), vm, **fields)

    assert response.status_code == 400
    assert list(form_errors(response)) == [field]
    assert any(message in error for error in form_errors(response)[field])
    assert not VmSnapshot.objects.exists() and not Job.objects.exists()


def test_the_quota_refuses_above_the_form_and_takes_nothing(vm, holder):
    user = holder(vm)
    snapshot_of(vm, "first")
    Quota.objects.create(snapshots=1)  # everyone's

    response = take(signed_in(user), vm, name="second")

    assert response.status_code == 400
    assert form_errors(response) == {
        "__all__": ["Quota exceeded for snapshots: requested 1, but already used 1 of 1."]
    }
    assert 'id="snapshot-refused"' in response.content.decode()
    assert list(VmSnapshot.objects.values_list("name", flat=True)) == ["first"]
    assert not Job.objects.exists()


def test_a_stopped_vms_memory_is_not_offered_and_refused_when_asked(vm, holder):
    VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.DOWN)
    user = holder(vm)
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    response = take(client, vm, name="with-memory", memory="on")

    assert " disabled" in memory_checkbox(page)
    assert "Only a running VM's memory can be saved" in page
    assert response.status_code == 400
    assert form_errors(response)["memory"][0].startswith(
        f"VM {vm.name} is Down: only a running VM's memory can be saved."
    )
    assert not VmSnapshot.objects.exists() and not Job.objects.exists()


def test_a_vm_never_started_has_no_disk_to_snapshot(make_vm, holder):
    never_started = make_vm(status=VmStatus.DOWN)
    user = holder(never_started)

    response = take(signed_in(user), never_started, name="first")

    assert response.status_code == 400
    assert form_errors(response) == {
        "__all__": [
            f"VM {never_started.name} has never been started: it has no disk to snapshot yet."
        ]
    }
    assert not VmSnapshot.objects.exists()


def test_a_stateless_pools_vm_says_no_snapshots_are_kept_instead_of_the_form(vm, holder, make_pool):
    pool = make_pool(cluster=vm.cluster, template=vm.template, size=1, stateless=True)
    VirtualMachine.objects.filter(pk=vm.pk).update(pool=pool, pool_index=1)
    user = holder(vm)
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    response = take(client, vm, name="nope")

    assert 'id="snapshots-not-kept"' in page and 'id="snapshot-form"' not in page
    assert f"pool {pool.name} is stateless" in page
    assert response.status_code == 400
    assert form_errors(response) == {
        "__all__": [
            f"VM {vm.name} is in a stateless pool: it goes back to its base when it is given "
            "back, so it takes no snapshots."
        ]
    }
    assert not VmSnapshot.objects.exists() and not Job.objects.exists()


# -- who may -----------------------------------------------------------------------------------


@pytest.fixture
def viewer(make_user, make_role, grant):
    """viewer(vm) -> a user who may see the VM but not operate it."""
    make_role("VmViewer", ["hosts.view_virtualmachine"])

    def make(vm):
        user = make_user()
        grant(user, "VmViewer", vm)
        return user

    return make


@pytest.mark.parametrize("who", ["viewer", "stranger"])
def test_someone_who_may_not_operate_the_vm_sees_no_section_and_gets_404s(
    vm, holder, viewer, make_user, who
):
    holder(vm)
    snapshot = snapshot_of(vm, "mine")
    user = viewer(vm) if who == "viewer" else make_user()
    client = signed_in(user)

    page = client.get(f"/vms/{vm.pk}/")
    answers = [
        client.get(f"/vms/{vm.pk}/snapshots/"),
        take(client, vm, name="theirs"),
        client.post(f"/vms/{vm.pk}/snapshots/{snapshot.pk}/revert/"),
        client.post(f"/vms/{vm.pk}/snapshots/{snapshot.pk}/delete/"),
    ]

    if who == "viewer":
        assert page.status_code == 200 and 'id="vm-snapshots"' not in page.content.decode()
    else:
        assert page.status_code == 404
    assert [answer.status_code for answer in answers] == [404, 404, 404, 404]
    assert list(VmSnapshot.objects.values_list("name", "status")) == [("mine", "ready")]
    assert not Job.objects.exists()


def test_a_snapshot_is_reached_only_through_its_own_vm(vm, holder, make_vm):
    user = holder(vm)
    other = make_vm(cluster=vm.cluster, host=vm.host, status=VmStatus.UP)
    holder_of_other = holder(other)
    theirs = snapshot_of(other, "theirs", owner=holder_of_other)

    response = signed_in(user).post(f"/vms/{vm.pk}/snapshots/{theirs.pk}/delete/")

    assert response.status_code == 404
    assert VmSnapshot.objects.get(pk=theirs.pk).status == SnapshotStatus.READY


def test_the_snapshot_forms_refuse_a_post_without_the_csrf_token(vm, holder):
    user = holder(vm)
    snapshot = snapshot_of(vm, "kept")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    for url in (
        f"/vms/{vm.pk}/snapshots/take/",
        f"/vms/{vm.pk}/snapshots/{snapshot.pk}/revert/",
        f"/vms/{vm.pk}/snapshots/{snapshot.pk}/delete/",
    ):
        response = client.post(url, {"snapshot-name": "x"})
        assert response.status_code == 403, url
    assert VmSnapshot.objects.count() == 1 and not Job.objects.exists()


def test_the_snapshot_pages_take_no_get_or_post_they_are_not_for(vm, holder):
    client = signed_in(holder(vm))

    assert client.get(f"/vms/{vm.pk}/snapshots/take/").status_code == 405
    assert client.post(f"/vms/{vm.pk}/snapshots/").status_code == 405
