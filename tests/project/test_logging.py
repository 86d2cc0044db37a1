"""Structured logs: CORRAL_LOG_FORMAT=json gives one JSON object per line, job ids included."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hosts import jobs
from hosts.models import JobKind
from hosts.operations import OPERATION_BY_KIND
from project.logging import JsonFormatter

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import logging, django
django.setup()
logging.getLogger("hosts.jobs").info("step %s", "one", extra={"job_id": 7, "vm_id": 3})
try:
    raise ValueError("boom")
except ValueError:
    logging.getLogger("hosts.jobs").exception("crashed")
"""


def run_probe(**env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "CORRAL_LOG_FORMAT"}
    base.update(DJANGO_SETTINGS_MODULE="project.test_settings", LOG_LEVEL="INFO", **env)
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_json_format_writes_one_json_object_per_line_with_the_extras():
    result = run_probe(CORRAL_LOG_FORMAT="json")

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    step, crash = (line for line in lines if line["logger"] == "hosts.jobs")
    assert (step["level"], step["message"], step["job_id"], step["vm_id"]) == (
        "INFO",
        "step one",
        7,
        3,
    )
    assert step["time"].endswith("+00:00")
    assert crash["message"] == "crashed"
    assert "ValueError: boom" in crash["exception"]


def test_plain_text_stays_the_default():
    result = run_probe()

    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stderr.splitlines() if "hosts.jobs" in line)
    assert line.split(" ", 3)[2:] == ["INFO", "hosts.jobs step one"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_an_unknown_log_format_refuses_to_load():
    result = run_probe(CORRAL_LOG_FORMAT="xml")

    assert result.returncode != 0
    assert "CORRAL_LOG_FORMAT must be plain or json" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_a_jobs_log_lines_carry_its_job_and_vm_ids(make_vm, caplog):
    vm = make_vm()
    job = jobs.submit(JobKind.NOOP, vm=vm, params={"steps": 2})

    with caplog.at_level(logging.INFO, logger="hosts.jobs"):
        assert jobs.run(job.pk, OPERATION_BY_KIND) == "succeeded"

    lines = [
        json.loads(JsonFormatter().format(record))
        for record in caplog.records
        if record.name == "hosts.jobs"
    ]
    assert [line["message"] for line in lines] == [
        f"job {job.pk} (noop) started",
        "Step 1 of 2",
        "Step 2 of 2",
        f"job {job.pk} (noop) succeeded",
    ]
    assert {(line["job_id"], line["vm_id"], line["job_kind"]) for line in lines} == {
        (job.pk, vm.pk, "noop")
    }


NOT_FOUND_PROBE = """
import django
django.setup()
from django.test import Client
Client(HTTP_HOST="127.0.0.1").get("/no-such-page/")
"""


def test_a_refused_request_is_logged_once_by_its_access_line_under_debug():
    environment = {k: v for k, v in os.environ.items() if k != "CORRAL_LOG_FORMAT"}
    environment.update(DJANGO_SETTINGS_MODULE="project.test_settings", DEBUG="1")
    result = subprocess.run(
        [sys.executable, "-c", NOT_FOUND_PROBE],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "/no-such-page/" in line]
    assert len(lines) == 1, result.stderr
    assert " INFO corral.access " in lines[0] and lines[0].endswith(
        tuple(f"{n}ms" for n in "0123456789")
    )
    assert "GET /no-such-page/ 404" in lines[0]


TASK_QUEUE_PROBE = """
import logging, django
django.setup()
queue = logging.getLogger("django-q")
queue.info("Q Cluster ten-alpha starting.")
queue.info("Enqueued [corral] 7")
queue.info("Process-abc processing corral-ticker 'project.ticker.tick'")
queue.info("Process-abc created task bravo from schedule [corral-ticker]")
queue.info("Processed 'project.ticker.tick' (corral-ticker)")
queue.warning("reincarnated worker Process-abc after timeout")
queue.info("Q Cluster ten-alpha has stopped.")
"""


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_the_task_queue_says_its_start_stop_and_warnings_not_each_routine_task(level):
    environment = {k: v for k, v in os.environ.items() if k != "CORRAL_LOG_FORMAT"}
    environment.update(DJANGO_SETTINGS_MODULE="project.test_settings", LOG_LEVEL=level)
    result = subprocess.run(
        [sys.executable, "-c", TASK_QUEUE_PROBE],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    said = [
        line.split(" django-q ", 1)[1]
        for line in result.stderr.splitlines()
        if " django-q " in line
    ]
    lifecycle = [
        "Q Cluster ten-alpha starting.",
        "reincarnated worker Process-abc after timeout",
        "Q Cluster ten-alpha has stopped.",
    ]
    if level == "INFO":
        assert said == lifecycle
    else:
        assert len(said) == 7
