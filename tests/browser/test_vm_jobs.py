"""A VM's jobs on its page in a real browser: a finished job says how it ended and when, not
the step it was on; the notice that a VM taken is starting lasts only while it starts; a job's
progress bar keeps its distance from what follows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from pools import services as pool_services
from tests.browser.conftest import log_in
from tests.pools.fixtures import add_pool_vms

pytestmark = pytest.mark.slow


@pytest.fixture
def pool_with(make_pool, make_cluster, make_template):
    """pool_with(*statuses) -> a pool whose VMs are rows of those statuses (no host)."""

    def make(*statuses):
        pool = make_pool(cluster=make_cluster(), template=make_template(), size=len(statuses))
        add_pool_vms(pool, list(statuses))
        return pool

    return make


def _finished_start(vm: VirtualMachine, seconds: int) -> Job:
    """A start of ``vm`` that succeeded after ``seconds``, its last step still recorded."""
    started = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    job = Job.objects.create(
        kind=JobKind.START,
        vm=vm,
        state=JobState.SUCCEEDED,
        progress=1.0,
        step="Waiting for the VM to run",
        started_at=started,
        finished_at=started + timedelta(seconds=seconds),
    )
    Job.objects.filter(pk=job.pk).update(created_at=started - timedelta(seconds=1))
    job.refresh_from_db()
    return job


def test_a_finished_job_shows_how_it_ended_and_when_not_its_last_step(page, pool_with, pool_user):
    pool = pool_with(VmStatus.UP)
    user = pool_user(pool)
    vm = pool_services.allocate_vm(pool, user).vm
    # Taken before the start below: its holder's page lists the jobs since they took it.
    VirtualMachine.objects.filter(pk=vm.pk).update(taken_at=timezone.now() - timedelta(hours=1))
    job = _finished_start(vm, seconds=3)
    log_in(page, user)

    page.goto(f"/vms/{vm.pk}/")

    row = page.locator(f"#job-{job.pk}")
    expect(row).to_contain_text("Start · Succeeded")
    expect(row).not_to_contain_text("Waiting for the VM to run")
    finished = timezone.localtime(job.finished_at)
    expect(row.locator(".job-times")).to_have_text(
        f"Finished {finished:%Y-%m-%d %H:%M:%S} · took 3 s"
    )
    expect(row.locator("time")).to_have_attribute("datetime", finished.isoformat())


def test_the_notice_that_a_vm_taken_is_starting_goes_once_it_is_up(page, pool_with, pool_user):
    pool = pool_with(VmStatus.DOWN)
    user = pool_user(pool)
    log_in(page, user)
    page.locator(f'section.card.pool[data-pool="{pool.name}"]').get_by_role(
        "button", name="Take a VM"
    ).click()
    expect(page).to_have_url(re.compile(r"/vms/\d+/$"))
    vm = VirtualMachine.objects.get(owner=user)
    expect(page.locator("#vm-starting")).to_have_text(
        f"VM {vm.name} is starting now: this page shows it Up as soon as it runs."
    )
    page.evaluate("window.marker = 1")

    # The start job ends and the VM runs (what a worker and the host's sync record).
    Job.objects.filter(vm=vm).update(
        state=JobState.SUCCEEDED, progress=1.0, finished_at=timezone.now()
    )
    VirtualMachine.objects.filter(pk=vm.pk).update(status=VmStatus.UP)

    expect(page.locator("#vm-status")).to_have_text("Up")
    expect(page.locator("#vm-starting")).to_have_count(0)
    expect(page.locator("main")).not_to_contain_text("is starting now")
    assert page.evaluate("window.marker") == 1, "the page was reloaded"


def test_a_jobs_progress_bar_keeps_its_distance_from_the_card_below(
    page, pool_with, pool_user, grant
):
    pool = pool_with(VmStatus.UP)
    user = pool_user(pool)
    vm = pool_services.allocate_vm(pool, user).vm
    grant(user, "UserVmManager", vm)  # may change it: its settings card follows the jobs
    job = _finished_start(vm, seconds=3)
    log_in(page, user)

    page.goto(f"/vms/{vm.pk}/")

    bar = page.locator(f"#job-{job.pk} progress").bounding_box()
    card = page.locator("#vm-settings").bounding_box()
    gap = card["y"] - (bar["y"] + bar["height"])
    assert gap >= 24, f"the progress bar ends {gap:.1f} px above the card below"
