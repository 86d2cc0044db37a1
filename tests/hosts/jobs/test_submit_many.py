"""Queueing one job on each of many VMs at once (the prestart monitor's batches)."""

import pytest
from django_q.models import OrmQ

from hosts import jobs
from hosts.models import Job, JobKind, JobState
from hosts.tasks import run_job
from project.models import Event
from project.workers import task_path

pytestmark = pytest.mark.django_db


def _queued_job_ids() -> list[int]:
    return sorted(t.args()[0] for t in OrmQ.objects.all() if t.func() == task_path(run_job))


def test_each_idle_vm_gets_a_job_handed_to_a_worker_and_busy_vms_are_left_to_their_queue(
    make_vm, make_cluster, django_capture_on_commit_callbacks
):
    cluster = make_cluster()
    idle = [make_vm(cluster=cluster) for _ in range(3)]
    busy = make_vm(cluster=cluster)
    earlier = jobs.submit(JobKind.SHUTDOWN, vm=busy)
    OrmQ.objects.all().delete()

    with django_capture_on_commit_callbacks(execute=True):
        created = jobs.submit_many(JobKind.START, [*idle, busy], params={"reason": "prestart"})

    assert sorted(job.vm_id for job in created) == sorted(vm.pk for vm in idle)
    assert all(job.state == JobState.PENDING and job.dispatched_at for job in created)
    assert _queued_job_ids() == sorted(job.pk for job in created)
    assert list(Job.objects.filter(vm=busy).values_list("pk", flat=True)) == [earlier.pk]
    requested = Event.objects.filter(object_type="job", object_id__in=[j.pk for j in created])
    assert sorted(requested.values_list("vm_id", flat=True)) == sorted(vm.pk for vm in idle)


def test_queueing_many_takes_the_same_number_of_queries_for_5_and_40_vms(
    make_vm, make_cluster, django_assert_max_num_queries, django_capture_on_commit_callbacks
):
    # 40, not more: SQLite binds at most 999 values a query, and Django splits an insert of
    # more jobs (20 columns each) in two; PostgreSQL inserts any number in one.
    for count in (5, 40):
        cluster = make_cluster()
        vms = [make_vm(cluster=cluster) for _ in range(count)]
        OrmQ.objects.all().delete()
        # The hand-over to workers (one broker row per job) runs after commit, outside the count.
        with (
            django_capture_on_commit_callbacks() as handed_over,
            django_assert_max_num_queries(6),
        ):
            created = jobs.submit_many(JobKind.START, vms)
        for callback in handed_over:
            callback()
        assert len(created) == count
        assert len(_queued_job_ids()) == count
