"""The jobs API: who sees which jobs, filters, cancel permissions, and query counts."""

import pytest

from hosts import jobs
from hosts.models import Job, JobKind, JobState
from project.access.grants import revoke_role
from project.models import Role


def _ids(response) -> set[int]:
    assert response.status_code == 200, response.json()
    return {job["id"] for job in response.json()["results"]}


@pytest.fixture
def vm_user(make_user, grant, make_vm):
    """(user, vm): a user holding UserRole on one VM."""
    user = make_user()
    vm = make_vm()
    grant(user, "UserRole", vm)
    return user, vm


def test_a_user_lists_the_jobs_on_the_vms_they_may_see_and_no_others(vm_user, make_vm, client_for):
    user, vm = vm_user
    mine = jobs.submit(JobKind.NOOP, vm=vm)
    jobs.submit(JobKind.NOOP, vm=make_vm())

    listed = _ids(client_for(user).get("/api/jobs/"))

    assert listed == {mine.pk}


def test_a_job_on_a_vm_the_user_cannot_see_is_a_404(vm_user, make_vm, client_for):
    user, _ = vm_user
    other = jobs.submit(JobKind.NOOP, vm=make_vm())

    client = client_for(user)

    assert client.get(f"/api/jobs/{other.pk}/").status_code == 404
    assert client.post(f"/api/jobs/{other.pk}/cancel/").status_code == 404
    assert Job.objects.get(pk=other.pk).state == JobState.PENDING


def test_the_requester_still_sees_their_job_after_losing_access_to_the_vm(vm_user, client_for):
    user, vm = vm_user
    job = jobs.submit(JobKind.NOOP, vm=vm, requested_by=user)
    revoke_role(Role.objects.get(name="UserRole"), vm, user=user)

    client = client_for(user)

    assert client.get(f"/api/vms/{vm.pk}/").status_code == 404
    assert client.get(f"/api/jobs/{job.pk}/").json()["requested_by"] == user.username
    assert _ids(client.get("/api/jobs/")) == {job.pk}


def test_a_job_shows_its_kind_state_progress_and_empty_error(vm_user, client_for):
    user, vm = vm_user
    job = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 2}, requested_by=user)

    shown = client_for(user).get(f"/api/jobs/{job.pk}/").json()

    assert {k: shown[k] for k in ("kind", "vm", "params", "state", "progress", "error")} == {
        "kind": "noop",
        "vm": vm.pk,
        "params": {"steps": 2},
        "state": "pending",
        "progress": 0.0,
        "error": None,
    }
    assert shown["journal"] == []


def test_jobs_filter_by_state_kind_and_vm(make_vm, admin_user, client_for):
    vm, other_vm = make_vm(), make_vm()
    cancelled = jobs.request_cancel(jobs.submit(JobKind.NOOP, vm=vm, params={"n": 1}))
    pending = jobs.submit(JobKind.NOOP, vm=vm, params={"n": 2})
    elsewhere = jobs.submit(JobKind.NOOP, vm=other_vm)
    client = client_for(admin_user)

    assert _ids(client.get("/api/jobs/", {"state": "cancelled"})) == {cancelled.pk}
    assert _ids(client.get("/api/jobs/", {"vm": vm.pk})) == {cancelled.pk, pending.pk}
    assert _ids(client.get("/api/jobs/", {"state": "pending", "kind": "noop"})) == {
        pending.pk,
        elsewhere.pk,
    }


def test_jobs_cannot_be_created_changed_or_deleted_through_the_api(make_vm, admin_user, client_for):
    job = jobs.submit(JobKind.NOOP, vm=make_vm())
    client = client_for(admin_user)

    assert client.post("/api/jobs/", {"kind": "noop"}, format="json").status_code == 405
    assert client.patch(f"/api/jobs/{job.pk}/", {"state": "succeeded"}).status_code == 405
    assert client.delete(f"/api/jobs/{job.pk}/").status_code == 405
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


@pytest.fixture
def job_viewer(make_user, grant, make_role):
    """vm -> a user who may see the VM and its jobs, and operate it, but not cancel jobs."""
    make_role(
        "Operator", ["hosts.view_virtualmachine", "hosts.view_job", "hosts.operate_virtualmachine"]
    )

    def make(vm):
        user = make_user()
        grant(user, "Operator", vm)
        return user

    return make


def test_a_user_who_may_see_a_job_but_not_cancel_jobs_gets_403(make_vm, job_viewer, client_for):
    vm = make_vm()
    job = jobs.submit(JobKind.NOOP, vm=vm)

    response = client_for(job_viewer(vm)).post(f"/api/jobs/{job.pk}/cancel/")

    assert response.status_code == 403
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_the_requester_may_cancel_their_own_job(make_vm, job_viewer, client_for):
    vm = make_vm()
    user = job_viewer(vm)
    job = jobs.submit(JobKind.NOOP, vm=vm, requested_by=user)

    response = client_for(user).post(f"/api/jobs/{job.pk}/cancel/")

    assert response.status_code == 200
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


@pytest.mark.parametrize("count", [3, 30])
def test_listing_jobs_takes_a_fixed_number_of_queries(
    vm_user, client_for, django_assert_max_num_queries, count
):
    user, vm = vm_user
    for index in range(count):
        job = jobs.submit(JobKind.NOOP, vm=vm, params={"n": index}, requested_by=user)
        jobs.request_cancel(job)
    client = client_for(user)

    with django_assert_max_num_queries(4):
        response = client.get("/api/jobs/")

    assert response.json()["count"] == count
    assert all(len(job["journal"]) == 1 for job in response.json()["results"])
