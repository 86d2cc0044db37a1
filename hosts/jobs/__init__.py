"""The job runner: submit, serialize per VM, run step by step, heartbeat, cancel, reap.

A job is submitted as a Pending row. Jobs on one VM form a queue in id order: only its head
is handed to a task worker, and when it finishes the next one is. A second identical request
while one is still pending at the tail of the queue is answered with that job (CloudStack's
coalescing). The worker runs the operation's steps, journalling each, checking for
cancellation between steps and heartbeating; a job whose heartbeat goes stale (its worker
died) is failed by ``reap()``, and its VM set to what its host reports.

``dispatch`` holds the queue, ``runner`` runs one job, ``reaper`` fails the lost ones,
``settle`` sets a VM to what its host reports after any job, ``context`` is what an
operation's steps work with. Operations themselves live in ``hosts.operations``; the task that
runs a job (``hosts.tasks.run_job``) hands ``run`` their table by kind: the runner imports none
of them.
"""

from hosts.jobs.context import (
    JobCancelled,
    JobContext,
    JobFailed,
    JobLost,
    host_detail,
    log_extra,
)
from hosts.jobs.dispatch import (
    dispatch_next,
    request_cancel,
    run_jobs_with,
    submit,
    submit_many,
    submit_to_idle_vm,
)
from hosts.jobs.reaper import reap
from hosts.jobs.runner import run
from hosts.jobs.settle import changed_outside, finish_vm
from hosts.models import JobKind, JobState

__all__ = [
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobKind",
    "JobLost",
    "JobState",
    "changed_outside",
    "dispatch_next",
    "finish_vm",
    "host_detail",
    "log_extra",
    "reap",
    "request_cancel",
    "run",
    "run_jobs_with",
    "submit",
    "submit_many",
    "submit_to_idle_vm",
]
