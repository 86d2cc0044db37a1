"""The user portal's pages for VMs (and logging in), through the Django test client on the real
DB. Taking a VM from a pool: tests/pools/test_take_portal.py."""

from __future__ import annotations

import pytest
from django.test import Client

from hosts.models import Job, JobKind, JobState, VirtualMachine, VmStatus
from project.access.permissions import holds
from tests.pools.fixtures import pool_vms
from tests.portal import messages_of, signed_in

pytestmark = pytest.mark.django_db


# -- logging in --------------------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_the_login_page():
    response = Client().get("/vms/")
    assert response.status_code == 302
    assert response.url == "/login/?next=/vms/"


def test_a_wrong_password_is_refused_with_a_message_and_a_right_one_opens_the_portal(make_user):
    make_user("ann")
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    token = page.cookies["csrftoken"].value

    refused = client.post(
        "/login/", {"username": "ann", "password": "nope", "csrfmiddlewaretoken": token}
    )
    assert refused.status_code == 200
    assert "Please enter a correct username and password" in refused.content.decode()

    accepted = client.post(
        "/login/", {"username": "ann", "password": "pw-Corral-1", "csrfmiddlewaretoken": token}
    )
    assert (accepted.status_code, accepted.url) == (302, "/")
    assert client.get("/").context["user"].username == "ann"


def test_logging_out_is_a_post_with_csrf_and_ends_the_session(make_user):
    user = make_user("ann")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/logout/").status_code == 403  # no token: refused
    token = client.get("/").cookies["csrftoken"].value
    response = client.post("/logout/", {"csrfmiddlewaretoken": token})
    assert (response.status_code, response.url) == (302, "/login/")
    assert client.get("/").status_code == 302


# -- my VMs ------------------------------------------------------------------------------------


@pytest.fixture
def holder(pool_of, pool_user):
    """(user, vm): a user holding an Up VM of a pool, as after taking it."""
    pool = pool_of(up=2)
    user = pool_user(pool)
    signed_in(user).post(f"/pools/{pool.pk}/take/", follow=True)
    return user, VirtualMachine.objects.get(owner=user)


def test_my_vms_lists_the_users_vms_with_status_host_pool_and_actions(holder):
    user, vm = holder
    page = signed_in(user).get("/vms/").content.decode()

    assert f'data-vm="{vm.name}"' in page
    assert 'class="status status-up">Up<' in page
    assert vm.pool.name in page
    for operation in ("shutdown", "poweroff", "suspend", "return"):
        assert f'data-operation="{operation}"' in page
    assert 'data-operation="start"' not in page  # an Up VM is not offered a start
    others = VirtualMachine.objects.exclude(pk=vm.pk).filter(pool=vm.pool)
    assert all(f'data-vm="{other.name}"' not in page for other in others)


POWER_OPERATIONS = ("start", "shutdown", "poweroff", "suspend", "resume")


def _offered(page: str) -> set[str]:
    return {op for op in POWER_OPERATIONS if f'data-operation="{op}"' in page}


def test_a_taken_vm_that_is_starting_offers_no_power_operation_on_its_page_or_in_my_vms(
    pool_of, pool_user
):
    pool = pool_of(down=1)
    user = pool_user(pool)
    client = signed_in(user)
    client.post(f"/pools/{pool.pk}/take/")
    vm = VirtualMachine.objects.get(owner=user)
    assert Job.objects.get(vm=vm).kind == JobKind.START  # queued by the allocation

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    rows = client.get("/vms/rows/").content.decode()

    assert "is starting now" in page
    assert _offered(page) == set()
    assert _offered(rows) == set()


@pytest.mark.parametrize(
    ("status", "offered"),
    [
        (VmStatus.UP, {"shutdown", "poweroff", "suspend"}),
        (VmStatus.PAUSED, {"start", "shutdown", "poweroff", "resume"}),
        (VmStatus.DOWN, {"start"}),
        (VmStatus.STOPPING, set()),
        (VmStatus.UNKNOWN, set()),
    ],
)
def test_a_vm_offers_what_its_status_allows_also_while_its_keys_are_put_in(
    make_vm, make_user, grant, status, offered
):
    vm = make_vm(status=status)
    user = make_user()
    grant(user, "UserRole", vm)
    # Putting SSH keys in the guest leaves its power as it is.
    Job.objects.create(kind=JobKind.GUEST_KEYS, vm=vm)

    page = signed_in(user).get(f"/vms/{vm.pk}/").content.decode()

    assert _offered(page) == offered


def test_another_users_vm_and_its_jobs_are_404_by_url(holder, make_user):
    user, vm = holder
    job = Job.objects.create(kind=JobKind.NOOP, vm=vm, requested_by=user)
    stranger = signed_in(make_user())

    assert stranger.get(f"/vms/{vm.pk}/").status_code == 404
    assert stranger.get(f"/vms/{vm.pk}/panel/").status_code == 404
    assert stranger.post(f"/vms/{vm.pk}/shutdown/").status_code == 404
    assert stranger.post(f"/vms/{vm.pk}/return/").status_code == 404
    assert stranger.get(f"/jobs/{job.pk}/").status_code == 404
    vm.refresh_from_db()
    assert vm.owner == user
    assert Job.objects.filter(vm=vm).count() == 1


def test_an_operation_queues_its_job_and_the_vm_page_shows_its_progress(holder):
    user, vm = holder
    client = signed_in(user)

    response = client.post(f"/vms/{vm.pk}/shutdown/", follow=True)

    job = Job.objects.get(vm=vm)
    assert (job.kind, job.requested_by, job.state) == (JobKind.SHUTDOWN, user, JobState.PENDING)
    # Stopped, a VM of an automatic pool goes back to the pool: its job is followed from My VMs.
    assert response.redirect_chain[-1][0] == "/vms/"
    assert f"Shut down of {vm.name} queued (job {job.pk})." in messages_of(response)
    assert f'id="job-{job.pk}"' in response.content.decode()
    assert client.get(f"/jobs/{job.pk}/").status_code == 200


def test_an_operation_the_vm_cannot_do_now_is_refused_in_words(holder):
    user, vm = holder

    response = signed_in(user).post(f"/vms/{vm.pk}/resume/", follow=True)

    assert messages_of(response) == [f"VM {vm.name} is Up; it cannot resume from there."]
    assert not Job.objects.filter(vm=vm).exists()


def test_an_unknown_operation_is_a_404(holder):
    user, vm = holder
    assert signed_in(user).post(f"/vms/{vm.pk}/explode/").status_code == 404
    assert not Job.objects.exists()


def test_a_failed_job_shows_its_error_in_words(holder):
    user, vm = holder
    job = Job.objects.create(
        kind=JobKind.START,
        vm=vm,
        requested_by=user,
        state=JobState.FAILED,
        progress=0.5,
        error_code="no_host",
        error_message="No host can run this VM: every host is out of memory.",
    )

    fragment = signed_in(user).get(f"/jobs/{job.pk}/").content.decode()

    assert 'data-state="failed"' in fragment
    assert "No host can run this VM: every host is out of memory." in fragment
    assert '<progress class="progress" max="100" value="50"' in fragment


def test_returning_a_vm_gives_it_back_and_takes_the_users_grant_away(holder):
    user, vm = holder
    client = signed_in(user)

    response = client.post(f"/vms/{vm.pk}/return/", follow=True)

    vm.refresh_from_db()
    assert vm.owner is None
    assert f"VM {vm.name} went back to pool {vm.pool.name}." in messages_of(response)
    assert not holds(user, "hosts.view_virtualmachine", vm)
    assert client.get(f"/vms/{vm.pk}/").status_code == 404
    assert f'data-vm="{vm.name}"' not in client.get("/vms/").content.decode()


def test_a_user_who_may_see_but_not_operate_a_vm_gets_no_buttons_and_no_job(
    make_vm, make_user, grant, make_role
):
    vm = make_vm(status=VmStatus.UP)
    make_role("VmViewer", ["hosts.view_virtualmachine"])
    viewer = make_user()
    grant(viewer, "VmViewer", vm)
    client = signed_in(viewer)

    page = client.get(f"/vms/{vm.pk}/").content.decode()
    response = client.post(f"/vms/{vm.pk}/poweroff/", follow=True)

    assert 'id="vm-status"' in page
    assert "data-operation" not in page
    assert messages_of(response) == [f"You may look at VM {vm.name} but not operate it."]
    assert not Job.objects.exists()


def test_my_vms_rows_take_a_fixed_number_of_queries(
    pool_of, pool_user, grant, django_assert_max_num_queries
):
    def rows_for(count: int):
        pool = pool_of(up=count, max_user_vms=count)
        user = pool_user(pool)
        for vm in pool_vms(pool):
            VirtualMachine.objects.filter(pk=vm.pk).update(owner=user)
            grant(user, "UserRole", vm)
            Job.objects.create(kind=JobKind.NOOP, vm=vm, requested_by=user)
        return signed_in(user), user

    for count in (2, 30):
        client, _ = rows_for(count)
        with django_assert_max_num_queries(9):
            page = client.get("/vms/rows/").content.decode()
        assert page.count("<tr data-vm=") == count


def test_an_open_vm_page_whose_vm_went_back_sends_to_my_vms_without_losing_the_confirmation(
    holder,
):
    """The page's refresh runs beside the request that gave the VM back: it must not write
    the messages, or the confirmation of what the user did would be lost."""
    user, vm = holder
    client = signed_in(user)
    # The refresh of the still-open page goes out with the cookies from before the return.
    refresh = Client()
    refresh.cookies = client.cookies.__class__(client.cookies)

    returned = client.post(f"/vms/{vm.pk}/return/")
    panel = refresh.get(f"/vms/{vm.pk}/panel/", headers={"HX-Request": "true"})

    assert panel.status_code == 404
    assert panel["HX-Redirect"] == "/vms/?gone=1"
    assert "messages" not in panel.cookies
    assert returned.status_code == 302
    page = client.get(panel["HX-Redirect"])
    assert messages_of(page) == [f"VM {vm.name} went back to pool {vm.pool.name}."]
    notices = page.content.decode()
    assert "The VM you were looking at is no longer yours." in notices
    assert (
        "The VM you were looking at is no longer yours." not in client.get("/vms/").content.decode()
    )


# -- VMs held for the admins -------------------------------------------------------------------


@pytest.fixture
def held_pool_vm(pool_of):
    pool = pool_of(up=1)
    vm = pool_vms(pool)[0]
    VirtualMachine.objects.filter(pk=vm.pk).update(admin_hold=True)
    return vm


def test_a_pool_admin_sees_a_vm_is_held_and_releases_it_from_its_page(
    held_pool_vm, make_user, grant
):
    admin = make_user()
    grant(admin, "PoolAdmin", held_pool_vm.pool)
    client = signed_in(admin)
    page = client.get(f"/vms/{held_pool_vm.pk}/").content.decode()

    response = client.post(f"/vms/{held_pool_vm.pk}/hold/", {"held": "0"}, follow=True)

    assert 'id="vm-hold"' in page and 'data-operation="release"' in page
    assert messages_of(response) == [
        f"VM {held_pool_vm.name} was released: its pool may hand it out again."
    ]
    assert VirtualMachine.objects.get(pk=held_pool_vm.pk).admin_hold is False
    after = response.content.decode()
    assert 'id="vm-hold"' not in after and 'data-operation="hold"' in after


def test_a_user_who_may_only_use_a_held_vm_sees_the_hold_but_cannot_release_it(
    held_pool_vm, make_user, grant
):
    user = make_user()
    grant(user, "UserRole", held_pool_vm)
    client = signed_in(user)
    page = client.get(f"/vms/{held_pool_vm.pk}/").content.decode()

    response = client.post(f"/vms/{held_pool_vm.pk}/hold/", {"held": "0"}, follow=True)

    assert 'id="vm-hold"' in page
    assert 'data-operation="release"' not in page and 'data-operation="hold"' not in page
    assert messages_of(response) == [f"You may look at VM {held_pool_vm.name} but not change it."]
    assert VirtualMachine.objects.get(pk=held_pool_vm.pk).admin_hold is True


def test_a_hold_request_that_says_neither_hold_nor_release_changes_nothing(
    held_pool_vm, make_user, grant
):
    admin = make_user()
    grant(admin, "PoolAdmin", held_pool_vm.pool)

    response = signed_in(admin).post(
        f"/vms/{held_pool_vm.pk}/hold/", {"held": "maybe"}, follow=True
    )

    assert messages_of(response) == ["Say whether to hold the VM or release it."]
    assert VirtualMachine.objects.get(pk=held_pool_vm.pk).admin_hold is True


def test_a_vm_in_no_pool_offers_no_hold(make_vm, make_user, grant):
    vm = make_vm(status=VmStatus.UP)
    owner = make_user()
    grant(owner, "UserVmManager", vm)

    page = signed_in(owner).get(f"/vms/{vm.pk}/").content.decode()

    assert 'data-operation="hold"' not in page


def test_a_pool_admin_starting_a_pool_vm_from_its_page_holds_it(pool_of, make_user, grant):
    pool = pool_of(down=1)
    vm = pool_vms(pool)[0]
    admin = make_user()
    grant(admin, "PoolAdmin", pool)

    response = signed_in(admin).post(f"/vms/{vm.pk}/start/", follow=True)

    assert Job.objects.get(vm=vm).kind == JobKind.START
    assert VirtualMachine.objects.get(pk=vm.pk).admin_hold is True
    assert 'id="vm-hold"' in response.content.decode()
