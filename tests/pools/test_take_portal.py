"""The user portal's Take a VM page and taking a VM from a pool, through the Django test client
on the real DB. The pages of the VM taken: tests/hosts/portal/test_vms_portal.py."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from hosts.models import Job, JobKind, JobState, VirtualMachine
from tests.pools.fixtures import pool_vms
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


def test_the_take_page_lists_only_the_pools_the_user_may_take_from_with_ready_counts(
    pool_of, pool_user
):
    mine = pool_of(up=2, down=1, name="lab-open")
    pool_of(up=1, name="lab-closed")
    user = pool_user(mine)

    page = signed_in(user).get("/").content.decode()

    assert 'data-pool="lab-open"' in page
    assert "lab-closed" not in page
    assert '<span class="figure ready-count">2</span> ready now' in page


def test_taking_from_a_pool_with_a_running_vm_hands_it_over_at_once(pool_of, pool_user):
    pool = pool_of(up=1, down=1)
    up, _ = pool_vms(pool)
    user = pool_user(pool)
    client = signed_in(user)

    response = client.post(f"/pools/{pool.pk}/take/", follow=True)

    up.refresh_from_db()
    assert up.owner == user
    assert response.redirect_chain[-1][0] == f"/vms/{up.pk}/"
    assert f"VM {up.name} is yours and already running." in messages_of(response)
    assert not Job.objects.exists()


def test_taking_from_a_pool_with_none_running_starts_one_and_shows_its_job(pool_of, pool_user):
    pool = pool_of(down=2)
    user = pool_user(pool)

    response = signed_in(user).post(f"/pools/{pool.pk}/take/", follow=True)

    vm = VirtualMachine.objects.get(owner=user)
    job = Job.objects.get(vm=vm, kind=JobKind.START)
    page = response.content.decode()
    assert messages_of(response) == [f"VM {vm.name} is yours."]
    assert f'<p class="notice" id="vm-starting">VM {vm.name} is starting now:' in page
    assert f'data-job="{job.pk}"' in page
    assert '<progress class="progress" max="100"' in page


def test_the_per_user_limit_and_an_empty_pool_are_said_plainly_and_change_nothing(
    pool_of, pool_user
):
    pool = pool_of(up=2, max_user_vms=1)
    user = pool_user(pool)
    client = signed_in(user)
    client.post(f"/pools/{pool.pk}/take/", follow=True)

    again = client.post(f"/pools/{pool.pk}/take/", follow=True)
    assert VirtualMachine.objects.filter(owner=user).count() == 1
    [message] = messages_of(again)
    assert "its limit per user" in message

    empty = pool_of(up=0, down=0, size=0)
    other = pool_user(empty)
    exhausted = signed_in(other).post(f"/pools/{empty.pk}/take/", follow=True)
    assert messages_of(exhausted) == [f"Pool {empty.name} has no free VM left; try again later."]
    assert not VirtualMachine.objects.filter(owner=other).exists()


def test_taking_from_a_pool_the_user_has_no_grant_on_is_a_404_and_assigns_nothing(
    pool_of, make_user
):
    pool = pool_of(up=1)
    stranger = make_user()

    response = signed_in(stranger).post(f"/pools/{pool.pk}/take/")

    assert response.status_code == 404
    assert not VirtualMachine.objects.filter(owner__isnull=False).exists()


def test_taking_a_vm_needs_the_csrf_token(pool_of, pool_user):
    pool = pool_of(up=1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(pool_user(pool))

    assert client.post(f"/pools/{pool.pk}/take/").status_code == 403
    assert not VirtualMachine.objects.filter(owner__isnull=False).exists()


def _take_button(page: str, pool) -> str:
    card = page[page.index(f'data-pool="{pool.name}"') :]
    return re.search(r"<button [^>]*>Take a VM</button>", card).group(0)


def test_take_is_offered_while_a_stopped_vm_can_be_started_for_the_user(pool_of, pool_user):
    pool = pool_of(down=1)

    page = signed_in(pool_user(pool)).get("/").content.decode()

    assert _take_button(page, pool) == '<button class="primary" type="submit">Take a VM</button>'


def test_take_is_disabled_when_every_vm_is_taken_held_or_busy_and_taking_is_refused(
    pool_of, pool_user, make_user
):
    pool = pool_of(up=3)
    owned, held, busy = pool_vms(pool)
    VirtualMachine.objects.filter(pk=owned.pk).update(owner=make_user())
    VirtualMachine.objects.filter(pk=held.pk).update(admin_hold=True)
    Job.objects.create(kind=JobKind.SHUTDOWN, vm=busy, state=JobState.PENDING)
    user = pool_user(pool)
    client = signed_in(user)

    page = client.get("/").content.decode()
    taken = client.post(f"/pools/{pool.pk}/take/", follow=True)

    assert _take_button(page, pool) == (
        f'<button class="primary" type="submit" disabled aria-describedby="take-why-{pool.pk}">'
        "Take a VM</button>"
    )
    assert (
        f'<p class="muted" id="take-why-{pool.pk}">Nothing to take right now: every VM of this '
        "pool is taken or busy.</p>"
    ) in page
    assert messages_of(taken) == [f"Pool {pool.name} has no free VM left; try again later."]
    assert not VirtualMachine.objects.filter(owner=user).exists()


def _jobs_listed(client, vm) -> set[int]:
    page = client.get(f"/vms/{vm.pk}/").content.decode()
    jobs = page[page.index('id="vm-jobs"') :]
    return {int(pk) for pk in re.findall(r'data-job="(\d+)"', jobs)}


def test_a_pool_vm_lists_its_holder_the_jobs_since_they_took_it_and_its_admins_all(
    pool_of, pool_user, make_user, grant
):
    pool = pool_of(up=1)
    (vm,) = pool_vms(pool)
    earlier = [
        Job.objects.create(kind=JobKind.GUEST_KEYS, vm=vm, state=JobState.SUCCEEDED)
        for _ in range(3)
    ]
    Job.objects.filter(vm=vm).update(created_at=timezone.now() - timedelta(hours=1))
    user = pool_user(pool)
    holder = signed_in(user)
    holder.post(f"/pools/{pool.pk}/take/")
    own = Job.objects.create(
        kind=JobKind.SHUTDOWN, vm=vm, requested_by=user, state=JobState.SUCCEEDED
    )
    cluster_admin = make_user()
    grant(cluster_admin, "ClusterAdmin", pool.cluster)

    assert _jobs_listed(holder, vm) == {own.pk}
    assert _jobs_listed(signed_in(cluster_admin), vm) == {own.pk, *(job.pk for job in earlier)}
