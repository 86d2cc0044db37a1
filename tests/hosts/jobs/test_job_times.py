"""How long a finished job took, as a VM's page says it."""

from datetime import UTC, datetime, timedelta

import pytest

from hosts.models import Job, JobKind, JobState

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _job(**fields) -> Job:
    return Job(kind=JobKind.START, created_at=START - timedelta(seconds=30), **fields)


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(3, "3 s"), (125, "2 min 5 s"), (3840, "1 h 4 min")],
)
def test_a_finished_job_took_the_time_from_its_start_to_its_end(seconds, said):
    job = _job(
        state=JobState.SUCCEEDED,
        started_at=START,
        finished_at=START + timedelta(seconds=seconds),
    )

    assert job.took == said


def test_a_job_cancelled_before_it_started_took_the_time_since_it_was_queued():
    job = _job(state=JobState.CANCELLED, finished_at=START + timedelta(seconds=5))

    assert job.took == "35 s"


def test_a_running_job_has_taken_nothing_yet():
    assert _job(state=JobState.RUNNING, started_at=START).took == ""
