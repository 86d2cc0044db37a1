"""Cancelling jobs between steps, and the hook scripts run around VM operations."""

import pytest
from django_q.models import OrmQ

from hosts import driver, jobs
from hosts.models import Job, JobKind, JobState
from hosts.operations import OPERATION_BY_KIND
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _journal(job_id: int) -> list[str]:
    return list(Job.objects.get(pk=job_id).journal.values_list("message", flat=True))


def _queued_task_names() -> list[str]:
    return [task.name() for task in OrmQ.objects.all()]


# -- cancel ------------------------------------------------------------------------------------


def test_cancelling_a_running_job_stops_it_before_its_next_step(
    make_vm, admin_user, client_for, job_in_thread
):
    job = jobs.submit(JobKind.NOOP, vm=make_vm(), params={"steps": 5, "sleep": 0.4})
    worker = job_in_thread(job)
    wait_until(lambda: "Step 1 of 5" in _journal(job.pk), timeout=10)

    response = client_for(admin_user).post(f"/api/jobs/{job.pk}/cancel/")
    worker.join(10)

    assert response.status_code == 200
    assert response.json()["state"] == "cancelling"
    job.refresh_from_db()
    assert (job.state, worker.outcome, job.result) == (JobState.CANCELLED, "cancelled", None)
    journal = _journal(job.pk)
    asked = journal.index("Cancellation requested")
    assert journal[-1] == "Cancelled between steps"
    assert not [line for line in journal[asked:] if line.startswith("Step")]
    assert "Step 5 of 5" not in journal


def test_cancelling_a_pending_job_cancels_it_at_once(make_vm, admin_user, client_for):
    job = jobs.submit(JobKind.NOOP, vm=make_vm(), params={"steps": 1})

    response = client_for(admin_user).post(f"/api/jobs/{job.pk}/cancel/")

    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    assert response.json()["journal"][-1]["message"] == "Cancelled before it started"
    assert jobs.run(job.pk, OPERATION_BY_KIND) == "skipped"
    assert Job.objects.get(pk=job.pk).started_at is None


def test_cancelling_the_head_of_a_vm_queue_hands_the_next_job_to_a_worker(
    make_vm, admin_user, client_for
):
    vm = make_vm()
    head = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 1, "n": 1})
    behind = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 1, "n": 2})
    assert jobs.run(behind.pk, OPERATION_BY_KIND) == "skipped"  # it waits for the head
    assert f"job-{behind.pk}" not in _queued_task_names()

    client_for(admin_user).post(f"/api/jobs/{head.pk}/cancel/")

    assert f"job-{behind.pk}" in _queued_task_names()
    assert jobs.run(behind.pk, OPERATION_BY_KIND) == "succeeded"


@pytest.mark.parametrize("outcome", ["succeeded", "cancelled"])
def test_cancelling_a_finished_job_is_a_409(make_vm, admin_user, client_for, outcome):
    job = jobs.submit(JobKind.NOOP, vm=make_vm(), params={"steps": 1})
    if outcome == "cancelled":
        jobs.request_cancel(job)
    else:
        jobs.run(job.pk, OPERATION_BY_KIND)

    response = client_for(admin_user).post(f"/api/jobs/{job.pk}/cancel/")

    assert response.status_code == 409
    assert outcome in response.json()["detail"]
    assert Job.objects.get(pk=job.pk).state == outcome


# -- hooks -------------------------------------------------------------------------------------


def _start(vm) -> Job:
    job = jobs.submit(JobKind.START, vm=vm)
    jobs.run(job.pk, OPERATION_BY_KIND)
    job.refresh_from_db()
    return job


def _reported_anywhere(vm, daemons) -> set:
    return {driver.domain_power_state(d.uri, str(vm.uuid)) for d in daemons} - {None}


def test_a_hook_exiting_0_lets_the_job_continue_and_is_journalled(hooks_dir, sim_vm):
    hooks_dir("vm-pre-start", "10-check", "exit 0")
    vm = sim_vm()

    job = _start(vm)

    assert job.state == JobState.SUCCEEDED
    journal = _journal(job.pk)
    assert journal[:2] == ["Running vm-pre-start hooks", "Hook vm-pre-start/10-check ran"]
    vm.refresh_from_db()
    assert vm.status == "up"


def test_a_hook_exiting_1_is_logged_and_the_job_still_succeeds(hooks_dir, sim_vm):
    hooks_dir("vm-pre-start", "10-warn", "echo 'disk quota low' >&2; exit 1")
    vm = sim_vm()

    job = _start(vm)

    assert job.state == JobState.SUCCEEDED
    assert "Hook vm-pre-start/10-warn exited 1 (continuing): disk quota low" in _journal(job.pk)
    vm.refresh_from_db()
    assert vm.status == "up"


def test_a_hook_exiting_2_fails_the_job_and_the_vm_is_not_started(hooks_dir, sim_vm, sim_daemons):
    hooks_dir("vm-pre-start", "10-veto", "echo 'not in office hours' >&2; exit 2")
    vm = sim_vm()

    job = _start(vm)

    assert (job.state, job.error_code) == (JobState.FAILED, "hook_failed")
    assert "10-veto exited 2: not in office hours" in job.error_message
    vm.refresh_from_db()
    assert (vm.status, vm.host) == ("down", None)
    assert _reported_anywhere(vm, sim_daemons) == set()


def test_hooks_run_in_sorted_order_with_the_vm_and_the_reason(hooks_dir, sim_vm, tmp_path):
    calls = tmp_path / "calls.txt"
    hooks_dir("vm-pre-start", "20-second", f'echo "second $*" >> {calls}')
    hooks_dir("vm-pre-start", "10-first", f'echo "first $*" >> {calls}')
    vm = sim_vm()

    _start(vm)

    arguments = f"--vm-uuid {vm.uuid} --vm-id {vm.pk} --reason start"
    assert calls.read_text().splitlines() == [f"first {arguments}", f"second {arguments}"]


def test_a_failing_hook_stops_the_hooks_after_it(hooks_dir, sim_vm, tmp_path):
    calls = tmp_path / "calls.txt"
    hooks_dir("vm-pre-start", "10-veto", "exit 3")
    hooks_dir("vm-pre-start", "20-after", f"echo ran >> {calls}")

    job = _start(sim_vm())

    assert job.error_code == "hook_failed"
    assert not calls.exists()
